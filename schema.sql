-- coursed schema, version 1 (PRAGMA user_version = 1).
--
-- Embedded in the binary and applied by the migration step in src/db.rs. Later schema changes are
-- appended as new migrations; this file is never edited once released.
--
-- Ids are lower-case hyphenated UUID strings (v7, so that id order is creation order).
-- Timestamps are RFC 3339 UTC strings with milliseconds, so text order is time order.
-- Every foreign-key column is the leading column of an index; every sortable field has an index
-- (field, id) so that a sorted page never sorts the whole table.

CREATE TABLE modules (
    id           TEXT PRIMARY KEY NOT NULL,
    title        TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 255),
    introduction TEXT NOT NULL DEFAULT '' CHECK (length(introduction) <= 65535),
    content      TEXT NOT NULL DEFAULT '',
    external_id  TEXT CHECK (length(external_id) <= 255),
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE UNIQUE INDEX modules_external_id ON modules (external_id);
CREATE INDEX modules_title ON modules (title, id);
CREATE INDEX modules_created_at ON modules (created_at, id);
CREATE INDEX modules_updated_at ON modules (updated_at, id);

CREATE TABLE subjects (
    id                    TEXT PRIMARY KEY NOT NULL,
    title                 TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 255),
    introduction          TEXT NOT NULL DEFAULT '' CHECK (length(introduction) <= 65535),
    content               TEXT NOT NULL DEFAULT '',
    external_id           TEXT CHECK (length(external_id) <= 255),
    available_for_courses INTEGER NOT NULL DEFAULT 0 CHECK (available_for_courses IN (0, 1)),
    module_id             TEXT REFERENCES modules (id) ON DELETE SET NULL,
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL
);
CREATE INDEX subjects_module_id ON subjects (module_id, id);
CREATE UNIQUE INDEX subjects_external_id ON subjects (external_id);
CREATE INDEX subjects_title ON subjects (title, id);
CREATE INDEX subjects_created_at ON subjects (created_at, id);
CREATE INDEX subjects_updated_at ON subjects (updated_at, id);

CREATE TABLE chapters (
    id         TEXT PRIMARY KEY NOT NULL,
    title      TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 255),
    content    TEXT NOT NULL DEFAULT '',
    position   INTEGER NOT NULL DEFAULT 0 CHECK (position >= 0),
    subject_id TEXT NOT NULL REFERENCES subjects (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX chapters_subject_id ON chapters (subject_id, position, id);
CREATE INDEX chapters_title ON chapters (title, id);
CREATE INDEX chapters_position ON chapters (position, id);
CREATE INDEX chapters_created_at ON chapters (created_at, id);
CREATE INDEX chapters_updated_at ON chapters (updated_at, id);

-- Row counts kept by triggers, so that `meta.page.total` of a whole collection, or of one
-- parent's children, is one lookup instead of a count over the table.
-- (tbl, parent) = ('subjects', '') counts all subjects; ('subjects.module_id', M) those of module M.
-- `gen` of a whole table moves with every insert and delete: the page index of src/paging.rs is
-- valid for one generation.
CREATE TABLE row_counts (
    tbl    TEXT NOT NULL,
    parent TEXT NOT NULL,
    n      INTEGER NOT NULL,
    gen    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tbl, parent)
) WITHOUT ROWID;
INSERT INTO row_counts (tbl, parent, n) VALUES ('modules', '', 0), ('subjects', '', 0), ('chapters', '', 0);

CREATE TRIGGER modules_count_insert AFTER INSERT ON modules BEGIN
    UPDATE row_counts SET n = n + 1, gen = gen + 1 WHERE tbl = 'modules' AND parent = '';
END;
CREATE TRIGGER modules_count_delete AFTER DELETE ON modules BEGIN
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'modules' AND parent = '';
    DELETE FROM row_counts WHERE tbl = 'subjects.module_id' AND parent = OLD.id;
END;

CREATE TRIGGER subjects_count_insert AFTER INSERT ON subjects BEGIN
    UPDATE row_counts SET n = n + 1, gen = gen + 1 WHERE tbl = 'subjects' AND parent = '';
    INSERT INTO row_counts (tbl, parent, n)
        SELECT 'subjects.module_id', NEW.module_id, 1 WHERE NEW.module_id IS NOT NULL
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER subjects_count_delete AFTER DELETE ON subjects BEGIN
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'subjects' AND parent = '';
    UPDATE row_counts SET n = n - 1 WHERE tbl = 'subjects.module_id' AND parent = OLD.module_id;
    DELETE FROM row_counts WHERE tbl = 'chapters.subject_id' AND parent = OLD.id;
END;
CREATE TRIGGER subjects_count_move AFTER UPDATE OF module_id ON subjects
WHEN OLD.module_id IS NOT NEW.module_id BEGIN
    UPDATE row_counts SET n = n - 1 WHERE tbl = 'subjects.module_id' AND parent = OLD.module_id;
    INSERT INTO row_counts (tbl, parent, n)
        SELECT 'subjects.module_id', NEW.module_id, 1 WHERE NEW.module_id IS NOT NULL
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER chapters_count_insert AFTER INSERT ON chapters BEGIN
    UPDATE row_counts SET n = n + 1, gen = gen + 1 WHERE tbl = 'chapters' AND parent = '';
    INSERT INTO row_counts (tbl, parent, n) VALUES ('chapters.subject_id', NEW.subject_id, 1)
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER chapters_count_delete AFTER DELETE ON chapters BEGIN
    UPDATE row_counts SET n = n - 1, gen = gen + 1 WHERE tbl = 'chapters' AND parent = '';
    UPDATE row_counts SET n = n - 1 WHERE tbl = 'chapters.subject_id' AND parent = OLD.subject_id;
END;
CREATE TRIGGER chapters_count_move AFTER UPDATE OF subject_id ON chapters
WHEN OLD.subject_id IS NOT NEW.subject_id BEGIN
    UPDATE row_counts SET n = n - 1 WHERE tbl = 'chapters.subject_id' AND parent = OLD.subject_id;
    INSERT INTO row_counts (tbl, parent, n) VALUES ('chapters.subject_id', NEW.subject_id, 1)
        ON CONFLICT (tbl, parent) DO UPDATE SET n = n + 1;
END;
