-- coursed schema, PostgreSQL: every change kept (docs/design/history.md).
--
-- The triggers below write one row of `revisions` per change of a module, subject or chapter, in
-- the statement that makes it, and note it in `revision_pending`. Transactions commit out of the
-- order they drew their ids in, so the feed's order is given after commit: a sequencer (any
-- replica, one at a time under the row lock of `revision_head`) moves committed pending rows
-- into `revision_feed` with consecutive `seq` (src/store/postgres/sequencer.rs). Who writes is
-- read from the session settings `coursed.by` and `coursed.action`.

CREATE TABLE revisions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource_type text COLLATE "C" NOT NULL,
    resource_id   text COLLATE "C" NOT NULL,
    number        bigint NOT NULL,
    action        text COLLATE "C" NOT NULL CHECK (action IN ('create', 'update', 'delete', 'restore')),
    at            timestamptz NOT NULL,
    actor         text COLLATE "C" NOT NULL,
    changes       json NOT NULL
);
CREATE UNIQUE INDEX revisions_resource ON revisions (resource_type, resource_id, number);
-- A revision of a long text holds it once more: lz4 compresses it several times faster than
-- the default where the server has it.
DO $$ BEGIN ALTER TABLE revisions ALTER COLUMN changes SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN RAISE NOTICE 'lz4 is not available'; END $$;
CREATE TABLE revision_pending (revision bigint PRIMARY KEY);
CREATE TABLE revision_feed (seq bigint PRIMARY KEY, revision bigint NOT NULL UNIQUE);
CREATE TABLE revision_head (id integer PRIMARY KEY CHECK (id = 1), head bigint NOT NULL, floor bigint NOT NULL);
INSERT INTO revision_head VALUES (1, 0, 0);
-- Where the feed begins (after `floor`) and ends (`head`).
CREATE VIEW history_bounds AS SELECT floor, head FROM revision_head;

-- A time as the API writes it (UTC, milliseconds, `Z`), so that both engines record the same.
CREATE FUNCTION coursed_time(t timestamptz) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- The revisions as the store reads them on either engine: `seq` is the place in the feed (null
-- until sequenced), `key` what the API's id of a revision is made from.
CREATE VIEW revision_log AS
    SELECT f.seq, r.id AS key, r.resource_type, r.resource_id, r.number, r.action, coursed_time(r.at) AS at,
           r.actor, r.changes::text AS changes
    FROM revisions AS r LEFT JOIN revision_feed AS f ON f.revision = r.id;

-- Each table's trigger function records a revision with one statement of its own (PL/pgSQL
-- plans it once per session): the row in `revisions`, and its note in `revision_pending`.


CREATE FUNCTION modules_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('modules', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'modules' AND resource_id = NEW.id), 0) + 1,
                    coalesce(nullif(current_setting('coursed.action', true), ''), 'create'), date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_build_object('title', json_build_array(NULL, NEW.title), 'introduction', json_build_array(NULL, NEW.introduction), 'content', json_build_array(NULL, NEW.content), 'external_id', json_build_array(NULL, NEW.external_id), 'created_at', json_build_array(NULL, coursed_time(NEW.created_at)), 'updated_at', json_build_array(NULL, coursed_time(NEW.updated_at))))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    ELSIF TG_OP = 'DELETE' THEN
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('modules', OLD.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'modules' AND resource_id = OLD.id), 0) + 1,
                    'delete', date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_build_object('title', json_build_array(OLD.title, NULL), 'introduction', json_build_array(OLD.introduction, NULL), 'content', json_build_array(OLD.content, NULL), 'external_id', json_build_array(OLD.external_id, NULL), 'created_at', json_build_array(coursed_time(OLD.created_at), NULL), 'updated_at', json_build_array(coursed_time(OLD.updated_at), NULL)))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    ELSE
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('modules', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'modules' AND resource_id = NEW.id), 0) + 1,
                    coalesce(nullif(current_setting('coursed.action', true), ''), 'update'), date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_strip_nulls(json_build_object(
            'title', CASE WHEN OLD.title IS DISTINCT FROM NEW.title THEN json_build_array(OLD.title, NEW.title) END,
            'introduction', CASE WHEN OLD.introduction IS DISTINCT FROM NEW.introduction THEN json_build_array(OLD.introduction, NEW.introduction) END,
            'content', CASE WHEN OLD.content IS DISTINCT FROM NEW.content THEN json_build_array(OLD.content, NEW.content) END,
            'external_id', CASE WHEN OLD.external_id IS DISTINCT FROM NEW.external_id THEN json_build_array(OLD.external_id, NEW.external_id) END,
            'created_at', CASE WHEN OLD.created_at IS DISTINCT FROM NEW.created_at THEN json_build_array(coursed_time(OLD.created_at), coursed_time(NEW.created_at)) END,
            'updated_at', CASE WHEN OLD.updated_at IS DISTINCT FROM NEW.updated_at THEN json_build_array(coursed_time(OLD.updated_at), coursed_time(NEW.updated_at)) END)))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER modules_revision AFTER INSERT OR DELETE ON modules FOR EACH ROW EXECUTE FUNCTION modules_revision();
CREATE TRIGGER modules_revision_update AFTER UPDATE ON modules FOR EACH ROW
    WHEN ((OLD.title, OLD.introduction, OLD.content, OLD.external_id, OLD.created_at, OLD.updated_at) IS DISTINCT FROM (NEW.title, NEW.introduction, NEW.content, NEW.external_id, NEW.created_at, NEW.updated_at))
    EXECUTE FUNCTION modules_revision();

CREATE FUNCTION subjects_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('subjects', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'subjects' AND resource_id = NEW.id), 0) + 1,
                    coalesce(nullif(current_setting('coursed.action', true), ''), 'create'), date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_build_object('title', json_build_array(NULL, NEW.title), 'introduction', json_build_array(NULL, NEW.introduction), 'content', json_build_array(NULL, NEW.content), 'external_id', json_build_array(NULL, NEW.external_id), 'available_for_courses', json_build_array(NULL, NEW.available_for_courses), 'module', json_build_array(NULL, NEW.module_id), 'created_at', json_build_array(NULL, coursed_time(NEW.created_at)), 'updated_at', json_build_array(NULL, coursed_time(NEW.updated_at))))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    ELSIF TG_OP = 'DELETE' THEN
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('subjects', OLD.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'subjects' AND resource_id = OLD.id), 0) + 1,
                    'delete', date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_build_object('title', json_build_array(OLD.title, NULL), 'introduction', json_build_array(OLD.introduction, NULL), 'content', json_build_array(OLD.content, NULL), 'external_id', json_build_array(OLD.external_id, NULL), 'available_for_courses', json_build_array(OLD.available_for_courses, NULL), 'module', json_build_array(OLD.module_id, NULL), 'created_at', json_build_array(coursed_time(OLD.created_at), NULL), 'updated_at', json_build_array(coursed_time(OLD.updated_at), NULL)))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    ELSE
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('subjects', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'subjects' AND resource_id = NEW.id), 0) + 1,
                    coalesce(nullif(current_setting('coursed.action', true), ''), 'update'), date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_strip_nulls(json_build_object(
            'title', CASE WHEN OLD.title IS DISTINCT FROM NEW.title THEN json_build_array(OLD.title, NEW.title) END,
            'introduction', CASE WHEN OLD.introduction IS DISTINCT FROM NEW.introduction THEN json_build_array(OLD.introduction, NEW.introduction) END,
            'content', CASE WHEN OLD.content IS DISTINCT FROM NEW.content THEN json_build_array(OLD.content, NEW.content) END,
            'external_id', CASE WHEN OLD.external_id IS DISTINCT FROM NEW.external_id THEN json_build_array(OLD.external_id, NEW.external_id) END,
            'available_for_courses', CASE WHEN OLD.available_for_courses IS DISTINCT FROM NEW.available_for_courses THEN json_build_array(OLD.available_for_courses, NEW.available_for_courses) END,
            'module', CASE WHEN OLD.module_id IS DISTINCT FROM NEW.module_id THEN json_build_array(OLD.module_id, NEW.module_id) END,
            'created_at', CASE WHEN OLD.created_at IS DISTINCT FROM NEW.created_at THEN json_build_array(coursed_time(OLD.created_at), coursed_time(NEW.created_at)) END,
            'updated_at', CASE WHEN OLD.updated_at IS DISTINCT FROM NEW.updated_at THEN json_build_array(coursed_time(OLD.updated_at), coursed_time(NEW.updated_at)) END)))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER subjects_revision AFTER INSERT OR DELETE ON subjects FOR EACH ROW EXECUTE FUNCTION subjects_revision();
CREATE TRIGGER subjects_revision_update AFTER UPDATE ON subjects FOR EACH ROW
    WHEN ((OLD.title, OLD.introduction, OLD.content, OLD.external_id, OLD.available_for_courses, OLD.module_id, OLD.created_at, OLD.updated_at) IS DISTINCT FROM (NEW.title, NEW.introduction, NEW.content, NEW.external_id, NEW.available_for_courses, NEW.module_id, NEW.created_at, NEW.updated_at))
    EXECUTE FUNCTION subjects_revision();

CREATE FUNCTION chapters_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('chapters', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'chapters' AND resource_id = NEW.id), 0) + 1,
                    coalesce(nullif(current_setting('coursed.action', true), ''), 'create'), date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_build_object('title', json_build_array(NULL, NEW.title), 'content', json_build_array(NULL, NEW.content), 'position', json_build_array(NULL, NEW.position), 'subject', json_build_array(NULL, NEW.subject_id), 'created_at', json_build_array(NULL, coursed_time(NEW.created_at)), 'updated_at', json_build_array(NULL, coursed_time(NEW.updated_at))))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    ELSIF TG_OP = 'DELETE' THEN
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('chapters', OLD.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'chapters' AND resource_id = OLD.id), 0) + 1,
                    'delete', date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_build_object('title', json_build_array(OLD.title, NULL), 'content', json_build_array(OLD.content, NULL), 'position', json_build_array(OLD.position, NULL), 'subject', json_build_array(OLD.subject_id, NULL), 'created_at', json_build_array(coursed_time(OLD.created_at), NULL), 'updated_at', json_build_array(coursed_time(OLD.updated_at), NULL)))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    ELSE
        WITH r AS (
            INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
            VALUES ('chapters', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'chapters' AND resource_id = NEW.id), 0) + 1,
                    coalesce(nullif(current_setting('coursed.action', true), ''), 'update'), date_trunc('milliseconds', clock_timestamp()),
                    coalesce(nullif(current_setting('coursed.by', true), ''), 'sql:' || session_user),
                    json_strip_nulls(json_build_object(
            'title', CASE WHEN OLD.title IS DISTINCT FROM NEW.title THEN json_build_array(OLD.title, NEW.title) END,
            'content', CASE WHEN OLD.content IS DISTINCT FROM NEW.content THEN json_build_array(OLD.content, NEW.content) END,
            'position', CASE WHEN OLD.position IS DISTINCT FROM NEW.position THEN json_build_array(OLD.position, NEW.position) END,
            'subject', CASE WHEN OLD.subject_id IS DISTINCT FROM NEW.subject_id THEN json_build_array(OLD.subject_id, NEW.subject_id) END,
            'created_at', CASE WHEN OLD.created_at IS DISTINCT FROM NEW.created_at THEN json_build_array(coursed_time(OLD.created_at), coursed_time(NEW.created_at)) END,
            'updated_at', CASE WHEN OLD.updated_at IS DISTINCT FROM NEW.updated_at THEN json_build_array(coursed_time(OLD.updated_at), coursed_time(NEW.updated_at)) END)))
            RETURNING id)
        INSERT INTO revision_pending (revision) SELECT id FROM r;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chapters_revision AFTER INSERT OR DELETE ON chapters FOR EACH ROW EXECUTE FUNCTION chapters_revision();
CREATE TRIGGER chapters_revision_update AFTER UPDATE ON chapters FOR EACH ROW
    WHEN ((OLD.title, OLD.content, OLD.position, OLD.subject_id, OLD.created_at, OLD.updated_at) IS DISTINCT FROM (NEW.title, NEW.content, NEW.position, NEW.subject_id, NEW.created_at, NEW.updated_at))
    EXECUTE FUNCTION chapters_revision();

-- Every resource that exists has a history from here on: one `create` each, parents first,
-- in the feed at once.
INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'modules', r.id, 1, 'create', date_trunc('milliseconds', clock_timestamp()), 'migration', json_build_object('title', json_build_array(NULL, r.title), 'introduction', json_build_array(NULL, r.introduction), 'content', json_build_array(NULL, r.content), 'external_id', json_build_array(NULL, r.external_id), 'created_at', json_build_array(NULL, coursed_time(r.created_at)), 'updated_at', json_build_array(NULL, coursed_time(r.updated_at)))
    FROM modules AS r ORDER BY r.id;
INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'subjects', r.id, 1, 'create', date_trunc('milliseconds', clock_timestamp()), 'migration', json_build_object('title', json_build_array(NULL, r.title), 'introduction', json_build_array(NULL, r.introduction), 'content', json_build_array(NULL, r.content), 'external_id', json_build_array(NULL, r.external_id), 'available_for_courses', json_build_array(NULL, r.available_for_courses), 'module', json_build_array(NULL, r.module_id), 'created_at', json_build_array(NULL, coursed_time(r.created_at)), 'updated_at', json_build_array(NULL, coursed_time(r.updated_at)))
    FROM subjects AS r ORDER BY r.id;
INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'chapters', r.id, 1, 'create', date_trunc('milliseconds', clock_timestamp()), 'migration', json_build_object('title', json_build_array(NULL, r.title), 'content', json_build_array(NULL, r.content), 'position', json_build_array(NULL, r.position), 'subject', json_build_array(NULL, r.subject_id), 'created_at', json_build_array(NULL, coursed_time(r.created_at)), 'updated_at', json_build_array(NULL, coursed_time(r.updated_at)))
    FROM chapters AS r ORDER BY r.id;
INSERT INTO revision_feed (seq, revision) SELECT row_number() OVER (ORDER BY id), id FROM revisions;
UPDATE revision_head SET head = (SELECT count(*) FROM revision_feed);

-- A subject's deletion removes the counts of its chapters, and the chapters its foreign key
-- takes along are counted out after that: each left a stray row of -1 behind for a subject that
-- no longer exists, which a subject restored under its own id would count from. A chapter of a
-- subject being deleted is no longer counted out of it; the stray rows go.
CREATE OR REPLACE FUNCTION chapters_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO row_counts AS r (tbl, parent, slot, n, gen)
    SELECT d.t, d.p, coursed_slot(), -1, 1
    FROM (VALUES ('chapters', ''), ('chapters.subject_id', OLD.subject_id)) AS d (t, p)
    WHERE d.p = '' OR EXISTS (SELECT 1 FROM subjects WHERE id = OLD.subject_id)
    ON CONFLICT (tbl, parent, slot) DO UPDATE SET n = r.n - 1, gen = r.gen + 1;
    RETURN NULL;
END $$;
DELETE FROM row_counts AS r
WHERE r.tbl = 'chapters.subject_id' AND NOT EXISTS (SELECT 1 FROM subjects WHERE id = r.parent);
