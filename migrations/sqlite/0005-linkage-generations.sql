-- coursed schema, SQLite: each parent's counter of children (`row_counts` rows with a parent)
-- also counts changes of that set in `gen`: it moves whenever a child is linked to or unlinked
-- from the parent (insert, delete, move), even when the count ends as it was (one child
-- swapped for another). A resource's entity tag covers it (src/jsonapi/etag.rs), so that an
-- `If-Match` read before a child was added no longer matches a write that would replace the
-- set of children.

DROP TRIGGER subjects_count_insert;
CREATE TRIGGER subjects_count_insert AFTER INSERT ON subjects BEGIN
    UPDATE row_counts SET n = n + 1, gen = gen + 1 WHERE tbl = 'subjects' AND parent = '';
    INSERT INTO row_counts (tbl, parent, n, gen)
        SELECT 'subjects.module_id', NEW.module_id, 1, 1 WHERE NEW.module_id IS NOT NULL
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1, gen = gen + 1;
END;
DROP TRIGGER subjects_count_delete;
CREATE TRIGGER subjects_count_delete AFTER DELETE ON subjects BEGIN
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'subjects' AND parent = '';
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'subjects.module_id' AND parent = OLD.module_id;
    DELETE FROM row_counts WHERE tbl = 'chapters.subject_id' AND parent = OLD.id;
END;
DROP TRIGGER subjects_count_move;
CREATE TRIGGER subjects_count_move AFTER UPDATE OF module_id ON subjects
WHEN OLD.module_id IS NOT NEW.module_id BEGIN
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'subjects.module_id' AND parent = OLD.module_id;
    INSERT INTO row_counts (tbl, parent, n, gen)
        SELECT 'subjects.module_id', NEW.module_id, 1, 1 WHERE NEW.module_id IS NOT NULL
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1, gen = gen + 1;
END;

DROP TRIGGER chapters_count_insert;
CREATE TRIGGER chapters_count_insert AFTER INSERT ON chapters BEGIN
    UPDATE row_counts SET n = n + 1, gen = gen + 1 WHERE tbl = 'chapters' AND parent = '';
    INSERT INTO row_counts (tbl, parent, n, gen) VALUES ('chapters.subject_id', NEW.subject_id, 1, 1)
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1, gen = gen + 1;
END;
DROP TRIGGER chapters_count_delete;
CREATE TRIGGER chapters_count_delete AFTER DELETE ON chapters BEGIN
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'chapters' AND parent = '';
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'chapters.subject_id' AND parent = OLD.subject_id;
END;
DROP TRIGGER chapters_count_move;
CREATE TRIGGER chapters_count_move AFTER UPDATE OF subject_id ON chapters
WHEN OLD.subject_id IS NOT NEW.subject_id BEGIN
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'chapters.subject_id' AND parent = OLD.subject_id;
    INSERT INTO row_counts (tbl, parent, n, gen) VALUES ('chapters.subject_id', NEW.subject_id, 1, 1)
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1, gen = gen + 1;
END;
