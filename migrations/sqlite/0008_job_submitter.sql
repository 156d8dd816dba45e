-- 0008_job_submitter: the submitter kind that started each job. See the
-- PostgreSQL file of the same number for the column meaning.
ALTER TABLE table_maintenance_job ADD COLUMN submitter TEXT;
