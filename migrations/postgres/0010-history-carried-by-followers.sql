-- coursed schema for PostgreSQL, version 10: a follower writes the revisions it applies itself.
--
-- A database that follows another's feed keeps that feed's revisions as they were recorded
-- (action, number, time, author, changes), written beside the rows it applies, many to a
-- statement. Its transaction says so with `SET LOCAL coursed.recording = 'off'` (SQLite's
-- `history_context.recording`), which the history triggers now heed: they record nothing
-- while it is off, in that transaction only. Every other write is recorded as before.

DROP TRIGGER modules_revision ON modules;
DROP TRIGGER modules_revision_update ON modules;
CREATE TRIGGER modules_revision AFTER INSERT OR DELETE ON modules FOR EACH ROW
    WHEN (current_setting('coursed.recording', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION modules_revision();
CREATE TRIGGER modules_revision_update AFTER UPDATE ON modules FOR EACH ROW
    WHEN (current_setting('coursed.recording', true) IS DISTINCT FROM 'off'
          AND (OLD.title, OLD.introduction, OLD.content, OLD.external_id, OLD.created_at, OLD.updated_at) IS DISTINCT FROM (NEW.title, NEW.introduction, NEW.content, NEW.external_id, NEW.created_at, NEW.updated_at))
    EXECUTE FUNCTION modules_revision();

DROP TRIGGER subjects_revision ON subjects;
DROP TRIGGER subjects_revision_update ON subjects;
CREATE TRIGGER subjects_revision AFTER INSERT OR DELETE ON subjects FOR EACH ROW
    WHEN (current_setting('coursed.recording', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION subjects_revision();
CREATE TRIGGER subjects_revision_update AFTER UPDATE ON subjects FOR EACH ROW
    WHEN (current_setting('coursed.recording', true) IS DISTINCT FROM 'off'
          AND (OLD.title, OLD.introduction, OLD.content, OLD.external_id, OLD.available_for_courses, OLD.module_id, OLD.created_at, OLD.updated_at) IS DISTINCT FROM (NEW.title, NEW.introduction, NEW.content, NEW.external_id, NEW.available_for_courses, NEW.module_id, NEW.created_at, NEW.updated_at))
    EXECUTE FUNCTION subjects_revision();

DROP TRIGGER chapters_revision ON chapters;
DROP TRIGGER chapters_revision_update ON chapters;
CREATE TRIGGER chapters_revision AFTER INSERT OR DELETE ON chapters FOR EACH ROW
    WHEN (current_setting('coursed.recording', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION chapters_revision();
CREATE TRIGGER chapters_revision_update AFTER UPDATE ON chapters FOR EACH ROW
    WHEN (current_setting('coursed.recording', true) IS DISTINCT FROM 'off'
          AND (OLD.title, OLD.content, OLD.position, OLD.subject_id, OLD.created_at, OLD.updated_at) IS DISTINCT FROM (NEW.title, NEW.content, NEW.position, NEW.subject_id, NEW.created_at, NEW.updated_at))
    EXECUTE FUNCTION chapters_revision();
