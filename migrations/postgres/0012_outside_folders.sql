-- 0012_outside_folders: the folders outside its location that a table's
-- metadata references, for the orphan cleanup of the tables around it.
--
-- maintained_table.outside_folders: a JSON array of folders, as the
-- table's metadata spells them, of the files its current snapshot
-- references outside its location (files brought in with add_files, a
-- write.data.path elsewhere), recorded by the runner each time it samples
-- the table (NULL until a runner has). Orphan cleanup of a table whose
-- folders hold one of them keeps every file this table references.
ALTER TABLE maintained_table ADD COLUMN outside_folders text;
