-- coursed schema, SQLite: every change kept (docs/design/history.md).
--
-- `revisions` holds one row per change of a module, subject or chapter, written by the triggers
-- below in the statement that makes the change: its `seq` (the rowid) is the change feed's
-- order, which is commit order since one transaction writes at a time. `changes` is a JSON
-- object of each member that changed, `[before, after]` (a to-one relationship under its own
-- name, holding the id). The triggers read who writes from `history_context`: the server's
-- writer keeps a TEMP table of that name (which its TEMP copies of these triggers read first,
-- see src/store/sqlite/indexing.rs); other connections (a bulk load, the `sqlite3` shell) read
-- this one, which names them `sqlite` unless a coursed command says otherwise. A deletion is
-- recorded before the row goes (BEFORE DELETE), so that, as on PostgreSQL, a resource's
-- `delete` comes before those of the rows its foreign keys take along.

CREATE TABLE revisions (
    seq           INTEGER PRIMARY KEY,
    resource_type TEXT NOT NULL,
    resource_id   TEXT NOT NULL,
    number        INTEGER NOT NULL,
    action        TEXT NOT NULL CHECK (action IN ('create', 'update', 'delete', 'restore')),
    at            TEXT NOT NULL,
    actor         TEXT NOT NULL,
    changes       TEXT NOT NULL
);
CREATE UNIQUE INDEX revisions_resource ON revisions (resource_type, resource_id, number);

CREATE TABLE history_context (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    actor     TEXT NOT NULL DEFAULT 'sqlite',
    action    TEXT,
    recording INTEGER NOT NULL DEFAULT 1
);
INSERT INTO history_context (id) VALUES (1);

-- The revisions as the store reads them on either engine: `seq` is the place in the feed,
-- `key` what the API's id of a revision is made from.
CREATE VIEW revision_log AS
    SELECT seq, seq AS key, resource_type, resource_id, number, action, at, actor, changes FROM revisions;

-- The oldest position of the feed still kept (`coursed history prune` moves it).
CREATE TABLE history_state (id INTEGER PRIMARY KEY CHECK (id = 1), floor INTEGER NOT NULL DEFAULT 0);
INSERT INTO history_state (id) VALUES (1);
-- Where the feed begins (after `floor`) and ends (`head`).
CREATE VIEW history_bounds AS SELECT floor, coalesce((SELECT max(seq) FROM revisions), 0) AS head FROM history_state;


CREATE TRIGGER modules_revision_insert AFTER INSERT ON modules BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'modules', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'modules' AND resource_id = NEW.id), 0) + 1,
           coalesce(c.action, 'create'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           json_object('title', json_array(NULL, NEW.title), 'introduction', json_array(NULL, NEW.introduction), 'content', json_array(NULL, NEW.content), 'external_id', json_array(NULL, NEW.external_id), 'created_at', json_array(NULL, NEW.created_at), 'updated_at', json_array(NULL, NEW.updated_at))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;
CREATE TRIGGER modules_revision_update AFTER UPDATE ON modules
WHEN OLD.title IS NOT NEW.title
  OR OLD.introduction IS NOT NEW.introduction
  OR OLD.content IS NOT NEW.content
  OR OLD.external_id IS NOT NEW.external_id
  OR OLD.created_at IS NOT NEW.created_at
  OR OLD.updated_at IS NOT NEW.updated_at
BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'modules', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'modules' AND resource_id = NEW.id), 0) + 1,
           coalesce(c.action, 'update'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           (SELECT json_group_object(k, json(v)) FROM (
              SELECT 'title' AS k, json_array(OLD.title, NEW.title) AS v WHERE OLD.title IS NOT NEW.title
              UNION ALL SELECT 'introduction' AS k, json_array(OLD.introduction, NEW.introduction) AS v WHERE OLD.introduction IS NOT NEW.introduction
              UNION ALL SELECT 'content' AS k, json_array(OLD.content, NEW.content) AS v WHERE OLD.content IS NOT NEW.content
              UNION ALL SELECT 'external_id' AS k, json_array(OLD.external_id, NEW.external_id) AS v WHERE OLD.external_id IS NOT NEW.external_id
              UNION ALL SELECT 'created_at' AS k, json_array(OLD.created_at, NEW.created_at) AS v WHERE OLD.created_at IS NOT NEW.created_at
              UNION ALL SELECT 'updated_at' AS k, json_array(OLD.updated_at, NEW.updated_at) AS v WHERE OLD.updated_at IS NOT NEW.updated_at))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;
CREATE TRIGGER modules_revision_delete BEFORE DELETE ON modules BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'modules', OLD.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'modules' AND resource_id = OLD.id), 0) + 1,
           'delete', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           json_object('title', json_array(OLD.title, NULL), 'introduction', json_array(OLD.introduction, NULL), 'content', json_array(OLD.content, NULL), 'external_id', json_array(OLD.external_id, NULL), 'created_at', json_array(OLD.created_at, NULL), 'updated_at', json_array(OLD.updated_at, NULL))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;

CREATE TRIGGER subjects_revision_insert AFTER INSERT ON subjects BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'subjects', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'subjects' AND resource_id = NEW.id), 0) + 1,
           coalesce(c.action, 'create'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           json_object('title', json_array(NULL, NEW.title), 'introduction', json_array(NULL, NEW.introduction), 'content', json_array(NULL, NEW.content), 'external_id', json_array(NULL, NEW.external_id), 'available_for_courses', json_array(NULL, CASE NEW.available_for_courses WHEN 0 THEN json('false') WHEN 1 THEN json('true') END), 'module', json_array(NULL, NEW.module_id), 'created_at', json_array(NULL, NEW.created_at), 'updated_at', json_array(NULL, NEW.updated_at))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;
CREATE TRIGGER subjects_revision_update AFTER UPDATE ON subjects
WHEN OLD.title IS NOT NEW.title
  OR OLD.introduction IS NOT NEW.introduction
  OR OLD.content IS NOT NEW.content
  OR OLD.external_id IS NOT NEW.external_id
  OR OLD.available_for_courses IS NOT NEW.available_for_courses
  OR OLD.module_id IS NOT NEW.module_id
  OR OLD.created_at IS NOT NEW.created_at
  OR OLD.updated_at IS NOT NEW.updated_at
BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'subjects', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'subjects' AND resource_id = NEW.id), 0) + 1,
           coalesce(c.action, 'update'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           (SELECT json_group_object(k, json(v)) FROM (
              SELECT 'title' AS k, json_array(OLD.title, NEW.title) AS v WHERE OLD.title IS NOT NEW.title
              UNION ALL SELECT 'introduction' AS k, json_array(OLD.introduction, NEW.introduction) AS v WHERE OLD.introduction IS NOT NEW.introduction
              UNION ALL SELECT 'content' AS k, json_array(OLD.content, NEW.content) AS v WHERE OLD.content IS NOT NEW.content
              UNION ALL SELECT 'external_id' AS k, json_array(OLD.external_id, NEW.external_id) AS v WHERE OLD.external_id IS NOT NEW.external_id
              UNION ALL SELECT 'available_for_courses' AS k, json_array(CASE OLD.available_for_courses WHEN 0 THEN json('false') WHEN 1 THEN json('true') END, CASE NEW.available_for_courses WHEN 0 THEN json('false') WHEN 1 THEN json('true') END) AS v WHERE OLD.available_for_courses IS NOT NEW.available_for_courses
              UNION ALL SELECT 'module' AS k, json_array(OLD.module_id, NEW.module_id) AS v WHERE OLD.module_id IS NOT NEW.module_id
              UNION ALL SELECT 'created_at' AS k, json_array(OLD.created_at, NEW.created_at) AS v WHERE OLD.created_at IS NOT NEW.created_at
              UNION ALL SELECT 'updated_at' AS k, json_array(OLD.updated_at, NEW.updated_at) AS v WHERE OLD.updated_at IS NOT NEW.updated_at))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;
CREATE TRIGGER subjects_revision_delete BEFORE DELETE ON subjects BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'subjects', OLD.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'subjects' AND resource_id = OLD.id), 0) + 1,
           'delete', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           json_object('title', json_array(OLD.title, NULL), 'introduction', json_array(OLD.introduction, NULL), 'content', json_array(OLD.content, NULL), 'external_id', json_array(OLD.external_id, NULL), 'available_for_courses', json_array(CASE OLD.available_for_courses WHEN 0 THEN json('false') WHEN 1 THEN json('true') END, NULL), 'module', json_array(OLD.module_id, NULL), 'created_at', json_array(OLD.created_at, NULL), 'updated_at', json_array(OLD.updated_at, NULL))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;

CREATE TRIGGER chapters_revision_insert AFTER INSERT ON chapters BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'chapters', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'chapters' AND resource_id = NEW.id), 0) + 1,
           coalesce(c.action, 'create'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           json_object('title', json_array(NULL, NEW.title), 'content', json_array(NULL, NEW.content), 'position', json_array(NULL, NEW.position), 'subject', json_array(NULL, NEW.subject_id), 'created_at', json_array(NULL, NEW.created_at), 'updated_at', json_array(NULL, NEW.updated_at))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;
CREATE TRIGGER chapters_revision_update AFTER UPDATE ON chapters
WHEN OLD.title IS NOT NEW.title
  OR OLD.content IS NOT NEW.content
  OR OLD.position IS NOT NEW.position
  OR OLD.subject_id IS NOT NEW.subject_id
  OR OLD.created_at IS NOT NEW.created_at
  OR OLD.updated_at IS NOT NEW.updated_at
BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'chapters', NEW.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'chapters' AND resource_id = NEW.id), 0) + 1,
           coalesce(c.action, 'update'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           (SELECT json_group_object(k, json(v)) FROM (
              SELECT 'title' AS k, json_array(OLD.title, NEW.title) AS v WHERE OLD.title IS NOT NEW.title
              UNION ALL SELECT 'content' AS k, json_array(OLD.content, NEW.content) AS v WHERE OLD.content IS NOT NEW.content
              UNION ALL SELECT 'position' AS k, json_array(OLD.position, NEW.position) AS v WHERE OLD.position IS NOT NEW.position
              UNION ALL SELECT 'subject' AS k, json_array(OLD.subject_id, NEW.subject_id) AS v WHERE OLD.subject_id IS NOT NEW.subject_id
              UNION ALL SELECT 'created_at' AS k, json_array(OLD.created_at, NEW.created_at) AS v WHERE OLD.created_at IS NOT NEW.created_at
              UNION ALL SELECT 'updated_at' AS k, json_array(OLD.updated_at, NEW.updated_at) AS v WHERE OLD.updated_at IS NOT NEW.updated_at))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;
CREATE TRIGGER chapters_revision_delete BEFORE DELETE ON chapters BEGIN
    INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'chapters', OLD.id, coalesce((SELECT max(number) FROM revisions WHERE resource_type = 'chapters' AND resource_id = OLD.id), 0) + 1,
           'delete', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), c.actor,
           json_object('title', json_array(OLD.title, NULL), 'content', json_array(OLD.content, NULL), 'position', json_array(OLD.position, NULL), 'subject', json_array(OLD.subject_id, NULL), 'created_at', json_array(OLD.created_at, NULL), 'updated_at', json_array(OLD.updated_at, NULL))
    FROM history_context AS c WHERE c.id = 1 AND c.recording;
END;

-- Every resource that exists has a history from here on: one `create` each, parents first.
INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'modules', r.id, 1, 'create', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'migration', json_object('title', json_array(NULL, r.title), 'introduction', json_array(NULL, r.introduction), 'content', json_array(NULL, r.content), 'external_id', json_array(NULL, r.external_id), 'created_at', json_array(NULL, r.created_at), 'updated_at', json_array(NULL, r.updated_at))
    FROM modules AS r ORDER BY r.id;
INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'subjects', r.id, 1, 'create', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'migration', json_object('title', json_array(NULL, r.title), 'introduction', json_array(NULL, r.introduction), 'content', json_array(NULL, r.content), 'external_id', json_array(NULL, r.external_id), 'available_for_courses', json_array(NULL, CASE r.available_for_courses WHEN 0 THEN json('false') WHEN 1 THEN json('true') END), 'module', json_array(NULL, r.module_id), 'created_at', json_array(NULL, r.created_at), 'updated_at', json_array(NULL, r.updated_at))
    FROM subjects AS r ORDER BY r.id;
INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes)
    SELECT 'chapters', r.id, 1, 'create', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'migration', json_object('title', json_array(NULL, r.title), 'content', json_array(NULL, r.content), 'position', json_array(NULL, r.position), 'subject', json_array(NULL, r.subject_id), 'created_at', json_array(NULL, r.created_at), 'updated_at', json_array(NULL, r.updated_at))
    FROM chapters AS r ORDER BY r.id;
