-- 0011_table_location: where each table lives and whether its files may be
-- deleted, for orphan cleanup and the plan.
--
-- maintained_table.location: the table's location as its metadata last
-- said, recorded by the runner each time it loads the table (NULL until a
-- runner has). Orphan cleanup of one table leaves alone every other
-- registered table whose location lies under the folders it lists, also
-- when that table keeps its metadata elsewhere (write.metadata.path), where
-- no metadata folder marks it.
-- maintained_table.gc_enabled: the table property gc.enabled as the runner
-- last saw it (NULL until a runner has): the plan says orphan cleanup of a
-- table with gc.enabled=false deletes nothing.
ALTER TABLE maintained_table ADD COLUMN location TEXT;
ALTER TABLE maintained_table ADD COLUMN gc_enabled BOOLEAN;
