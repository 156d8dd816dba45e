-- 0011_table_location: where each table lives, for orphan cleanup.
--
-- maintained_table.location: the table's location as its metadata last
-- said, recorded by the runner each time it loads the table (NULL until a
-- runner has). Orphan cleanup of one table leaves alone every other
-- registered table whose location lies under the folders it lists, also
-- when that table keeps its metadata elsewhere (write.metadata.path), where
-- no metadata folder marks it.
ALTER TABLE maintained_table ADD COLUMN location text;
