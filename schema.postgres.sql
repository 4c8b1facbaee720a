-- coursed schema for PostgreSQL, version 1 (the version is kept in coursed_schema).
--
-- Embedded in the binary and applied by src/store/postgres/migrate.rs under an advisory lock,
-- so that replicas starting together migrate once. Later changes are appended as new
-- migrations; this file is never edited once released. It mirrors schema.sql (SQLite):
--
-- * Ids are lower-case hyphenated UUID strings (v7, so that id order is creation order).
-- * Every text column uses the "C" collation: byte order, the order SQLite's BINARY collation
--   gives, so that `sort=title` and `sort=id` answer the same on both engines.
-- * Timestamps are timestamptz, always written by coursed with millisecond precision.
-- * Every foreign-key column leads an index; every sortable field has an index (field, id);
--   external_id's unique index, in the API's order (nulls first), serves its sort.

CREATE TABLE coursed_schema (
    version     integer PRIMARY KEY,
    migrated_at timestamptz NOT NULL DEFAULT now()
);

-- Settings shared by every replica (the token generated at first start).
CREATE TABLE coursed_settings (
    name  text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE modules (
    id           text COLLATE "C" PRIMARY KEY,
    title        text COLLATE "C" NOT NULL CHECK (char_length(title) BETWEEN 1 AND 255),
    introduction text COLLATE "C" NOT NULL DEFAULT '' CHECK (char_length(introduction) <= 65535),
    content      text COLLATE "C" NOT NULL DEFAULT '',
    external_id  text COLLATE "C" CHECK (char_length(external_id) <= 255),
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE UNIQUE INDEX modules_external_id ON modules (external_id NULLS FIRST);
CREATE INDEX modules_title ON modules (title, id);
CREATE INDEX modules_created_at ON modules (created_at, id);
CREATE INDEX modules_updated_at ON modules (updated_at, id);

CREATE TABLE subjects (
    id                    text COLLATE "C" PRIMARY KEY,
    title                 text COLLATE "C" NOT NULL CHECK (char_length(title) BETWEEN 1 AND 255),
    introduction          text COLLATE "C" NOT NULL DEFAULT '' CHECK (char_length(introduction) <= 65535),
    content               text COLLATE "C" NOT NULL DEFAULT '',
    external_id           text COLLATE "C" CHECK (char_length(external_id) <= 255),
    available_for_courses boolean NOT NULL DEFAULT false,
    module_id             text COLLATE "C" REFERENCES modules (id) ON DELETE SET NULL,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL
);
CREATE INDEX subjects_module_id ON subjects (module_id, id);
CREATE UNIQUE INDEX subjects_external_id ON subjects (external_id NULLS FIRST);
CREATE INDEX subjects_title ON subjects (title, id);
CREATE INDEX subjects_created_at ON subjects (created_at, id);
CREATE INDEX subjects_updated_at ON subjects (updated_at, id);

CREATE TABLE chapters (
    id         text COLLATE "C" PRIMARY KEY,
    title      text COLLATE "C" NOT NULL CHECK (char_length(title) BETWEEN 1 AND 255),
    content    text COLLATE "C" NOT NULL DEFAULT '',
    position   bigint NOT NULL DEFAULT 0 CHECK (position >= 0),
    subject_id text COLLATE "C" NOT NULL REFERENCES subjects (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX chapters_subject_id ON chapters (subject_id, position, id);
CREATE INDEX chapters_title ON chapters (title, id);
CREATE INDEX chapters_position ON chapters (position, id);
CREATE INDEX chapters_created_at ON chapters (created_at, id);
CREATE INDEX chapters_updated_at ON chapters (updated_at, id);

-- Long text is compressed with lz4 where the server has it: several times cheaper to write
-- than the default (pglz), for about the same size.
DO $$
BEGIN
    ALTER TABLE modules ALTER COLUMN content SET COMPRESSION lz4, ALTER COLUMN introduction SET COMPRESSION lz4;
    ALTER TABLE subjects ALTER COLUMN content SET COMPRESSION lz4, ALTER COLUMN introduction SET COMPRESSION lz4;
    ALTER TABLE chapters ALTER COLUMN content SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available; long text keeps the default compression';
END $$;

-- Row counts kept by triggers, so that `meta.page.total` of a whole collection, or of one
-- parent's children, is a small sum instead of a count over the table. Unlike SQLite (one
-- writer), many transactions write at once here: each adds to the slot of its own server
-- process, so that concurrent writers do not queue on (or, serializable, conflict over) one
-- hot row. A count is the sum of its slots (at most 64). `gen` of a whole table moves with every insert and
-- delete: the page index of src/store/paging.rs is valid for one generation.
CREATE TABLE row_counts (
    tbl    text COLLATE "C" NOT NULL,
    parent text COLLATE "C" NOT NULL,
    slot   integer NOT NULL,
    n      bigint NOT NULL DEFAULT 0,
    gen    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tbl, parent, slot)
);

-- The slot of this session: coursed gives each of its connections its own (the setting
-- coursed.slot); any other session uses one from its process id.
CREATE FUNCTION coursed_slot() RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('coursed.slot', true), '')::integer, pg_backend_pid() % 64)
$$;

-- Each trigger adds its changes in one statement: every counter it moves, in its own slot.
CREATE FUNCTION modules_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen) VALUES ('modules', '', coursed_slot(), 1, 1)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + 1, gen = r.gen + 1;
    RETURN NULL;
END $$;
-- Trigger names sort after the foreign keys' own triggers ("RI_..."), so that a cascade's
-- changes are counted before a deleted parent's counters are dropped.
CREATE FUNCTION modules_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen) VALUES ('modules', '', coursed_slot(), -1, 1)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n - 1, gen = r.gen + 1;
    DELETE FROM row_counts WHERE tbl = 'subjects.module_id' AND parent = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER modules_inserted AFTER INSERT ON modules FOR EACH ROW EXECUTE FUNCTION modules_inserted();
CREATE TRIGGER modules_deleted AFTER DELETE ON modules FOR EACH ROW EXECUTE FUNCTION modules_deleted();

CREATE FUNCTION subjects_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), 1, d.g
    FROM (VALUES ('subjects', '', 1), ('subjects.module_id', NEW.module_id, 0)) AS d (t, p, g) WHERE d.p IS NOT NULL
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + 1, gen = r.gen + EXCLUDED.gen;
    RETURN NULL;
END $$;
CREATE FUNCTION subjects_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), -1, d.g
    FROM (VALUES ('subjects', '', 1), ('subjects.module_id', OLD.module_id, 0)) AS d (t, p, g) WHERE d.p IS NOT NULL
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n - 1, gen = r.gen + EXCLUDED.gen;
    DELETE FROM row_counts WHERE tbl = 'chapters.subject_id' AND parent = OLD.id;
    RETURN NULL;
END $$;
CREATE FUNCTION subjects_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT 'subjects.module_id', d.p, coursed_slot(), d.n, 0
    FROM (VALUES (OLD.module_id, -1), (NEW.module_id, 1)) AS d (p, n) WHERE d.p IS NOT NULL
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + EXCLUDED.n;
    RETURN NULL;
END $$;
CREATE TRIGGER subjects_inserted AFTER INSERT ON subjects FOR EACH ROW EXECUTE FUNCTION subjects_inserted();
CREATE TRIGGER subjects_deleted AFTER DELETE ON subjects FOR EACH ROW EXECUTE FUNCTION subjects_deleted();
CREATE TRIGGER subjects_moved AFTER UPDATE OF module_id ON subjects FOR EACH ROW
    WHEN (OLD.module_id IS DISTINCT FROM NEW.module_id) EXECUTE FUNCTION subjects_moved();

CREATE FUNCTION chapters_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), 1, d.g
    FROM (VALUES ('chapters', '', 1), ('chapters.subject_id', NEW.subject_id, 0)) AS d (t, p, g)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + 1, gen = r.gen + EXCLUDED.gen;
    RETURN NULL;
END $$;
CREATE FUNCTION chapters_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), -1, d.g
    FROM (VALUES ('chapters', '', 1), ('chapters.subject_id', OLD.subject_id, 0)) AS d (t, p, g)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n - 1, gen = r.gen + EXCLUDED.gen;
    RETURN NULL;
END $$;
CREATE FUNCTION chapters_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT 'chapters.subject_id', d.p, coursed_slot(), d.n, 0
    FROM (VALUES (OLD.subject_id, -1), (NEW.subject_id, 1)) AS d (p, n)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + EXCLUDED.n;
    RETURN NULL;
END $$;
CREATE TRIGGER chapters_inserted AFTER INSERT ON chapters FOR EACH ROW EXECUTE FUNCTION chapters_inserted();
CREATE TRIGGER chapters_deleted AFTER DELETE ON chapters FOR EACH ROW EXECUTE FUNCTION chapters_deleted();
CREATE TRIGGER chapters_moved AFTER UPDATE OF subject_id ON chapters FOR EACH ROW
    WHEN (OLD.subject_id IS DISTINCT FROM NEW.subject_id) EXECUTE FUNCTION chapters_moved();
