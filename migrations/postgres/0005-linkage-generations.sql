-- coursed schema, PostgreSQL: each parent's counter of children (`row_counts` rows with a
-- parent) also counts changes of that set in `gen`: it moves whenever a child is linked to or
-- unlinked from the parent (insert, delete, move), even when the count ends as it was. A
-- resource's entity tag covers the sum over its slots, which only grows (src/jsonapi/etag.rs),
-- so that an `If-Match` read before a child was added no longer matches a write that would
-- replace the set of children.

CREATE OR REPLACE FUNCTION subjects_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), 1, 1
    FROM (VALUES ('subjects', ''), ('subjects.module_id', NEW.module_id)) AS d (t, p) WHERE d.p IS NOT NULL
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + 1, gen = r.gen + 1;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION subjects_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), -1, 1
    FROM (VALUES ('subjects', ''), ('subjects.module_id', OLD.module_id)) AS d (t, p) WHERE d.p IS NOT NULL
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n - 1, gen = r.gen + 1;
    DELETE FROM row_counts WHERE tbl = 'chapters.subject_id' AND parent = OLD.id;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION subjects_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT 'subjects.module_id', d.p, coursed_slot(), d.n, 1
    FROM (VALUES (OLD.module_id, -1), (NEW.module_id, 1)) AS d (p, n) WHERE d.p IS NOT NULL
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + EXCLUDED.n, gen = r.gen + 1;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION chapters_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), 1, 1
    FROM (VALUES ('chapters', ''), ('chapters.subject_id', NEW.subject_id)) AS d (t, p)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + 1, gen = r.gen + 1;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION chapters_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), -1, 1
    FROM (VALUES ('chapters', ''), ('chapters.subject_id', OLD.subject_id)) AS d (t, p)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n - 1, gen = r.gen + 1;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION chapters_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT 'chapters.subject_id', d.p, coursed_slot(), d.n, 1
    FROM (VALUES (OLD.subject_id, -1), (NEW.subject_id, 1)) AS d (p, n)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n + EXCLUDED.n, gen = r.gen + 1;
    RETURN NULL;
END $$;
