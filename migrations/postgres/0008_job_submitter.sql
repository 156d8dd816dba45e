-- 0008_job_submitter: the submitter kind that started each job.
--
-- table_maintenance_job.submitter: the kind of job submitter that submitted
-- the job and set job_id: local, command or gravitino. NULL for rows made
-- before this migration, for manual and replay runs, and until the job was
-- submitted.
ALTER TABLE table_maintenance_job ADD COLUMN submitter text;
