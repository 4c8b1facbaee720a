-- coursed schema, SQLite: full-text search (src/search).
--
-- Each searchable attribute has a words column: its text as search words (HTML removed from a
-- module's content, compatibility-decomposed, lower case, without accents, split into runs of
-- letters and digits, space-separated). coursed computes the words itself, in every statement
-- that writes the text; the database only indexes them. The FTS5 index of a table reads the
-- words columns (external content, keyed by rowid); its `ascii` tokenizer splits only at the
-- spaces, since a word holds nothing else; it keeps which column holds a word, not where
-- (detail=column: smaller and cheaper to write; phrases are checked on the words columns, as on
-- PostgreSQL). Triggers keep the index in step with the table in
-- the same transaction as every insert, update and delete, cascades included. The fts5vocab
-- tables of an index count the rows holding each word: the total of a one-word search. A
-- second, small index of the titles alone (`{table}_titles`, rows only) tells at once how many
-- rows hold a word in the title and which, for the first tier of best match first.
--
-- Runs in two parts, in one transaction: the words columns; then (at the marker below) coursed
-- computes the words of the rows that exist, and the indexes and triggers are made and filled.

ALTER TABLE modules ADD COLUMN title_words TEXT NOT NULL DEFAULT '';
ALTER TABLE modules ADD COLUMN introduction_words TEXT NOT NULL DEFAULT '';
ALTER TABLE modules ADD COLUMN content_words TEXT NOT NULL DEFAULT '';

ALTER TABLE subjects ADD COLUMN title_words TEXT NOT NULL DEFAULT '';
ALTER TABLE subjects ADD COLUMN introduction_words TEXT NOT NULL DEFAULT '';
ALTER TABLE subjects ADD COLUMN content_words TEXT NOT NULL DEFAULT '';

ALTER TABLE chapters ADD COLUMN title_words TEXT NOT NULL DEFAULT '';
ALTER TABLE chapters ADD COLUMN content_words TEXT NOT NULL DEFAULT '';

-- coursed: words of existing rows

CREATE VIRTUAL TABLE modules_search USING fts5(title_words, introduction_words, content_words, content='modules', tokenize='ascii', detail='column', columnsize=0);
CREATE VIRTUAL TABLE modules_search_vocab USING fts5vocab(modules_search, 'row');
CREATE VIRTUAL TABLE modules_titles USING fts5(title_words, content='modules', tokenize='ascii', detail='none', columnsize=0);
CREATE VIRTUAL TABLE modules_titles_vocab USING fts5vocab(modules_titles, 'row');

CREATE TRIGGER modules_search_insert AFTER INSERT ON modules BEGIN
    INSERT INTO modules_titles (rowid, title_words) VALUES (NEW.rowid, NEW.title_words);
    INSERT INTO modules_search (rowid, title_words, introduction_words, content_words) VALUES (NEW.rowid, NEW.title_words, NEW.introduction_words, NEW.content_words);
END;
CREATE TRIGGER modules_search_delete AFTER DELETE ON modules BEGIN
    INSERT INTO modules_titles (modules_titles, rowid, title_words) VALUES ('delete', OLD.rowid, OLD.title_words);
    INSERT INTO modules_search (modules_search, rowid, title_words, introduction_words, content_words) VALUES ('delete', OLD.rowid, OLD.title_words, OLD.introduction_words, OLD.content_words);
END;
CREATE TRIGGER modules_search_update AFTER UPDATE OF title_words, introduction_words, content_words ON modules
WHEN OLD.title_words IS NOT NEW.title_words OR OLD.introduction_words IS NOT NEW.introduction_words OR OLD.content_words IS NOT NEW.content_words BEGIN
    INSERT INTO modules_search (modules_search, rowid, title_words, introduction_words, content_words) VALUES ('delete', OLD.rowid, OLD.title_words, OLD.introduction_words, OLD.content_words);
    INSERT INTO modules_search (rowid, title_words, introduction_words, content_words) VALUES (NEW.rowid, NEW.title_words, NEW.introduction_words, NEW.content_words);
    INSERT INTO modules_titles (modules_titles, rowid, title_words) VALUES ('delete', OLD.rowid, OLD.title_words);
    INSERT INTO modules_titles (rowid, title_words) VALUES (NEW.rowid, NEW.title_words);
END;

CREATE VIRTUAL TABLE subjects_search USING fts5(title_words, introduction_words, content_words, content='subjects', tokenize='ascii', detail='column', columnsize=0);
CREATE VIRTUAL TABLE subjects_search_vocab USING fts5vocab(subjects_search, 'row');
CREATE VIRTUAL TABLE subjects_titles USING fts5(title_words, content='subjects', tokenize='ascii', detail='none', columnsize=0);
CREATE VIRTUAL TABLE subjects_titles_vocab USING fts5vocab(subjects_titles, 'row');

CREATE TRIGGER subjects_search_insert AFTER INSERT ON subjects BEGIN
    INSERT INTO subjects_titles (rowid, title_words) VALUES (NEW.rowid, NEW.title_words);
    INSERT INTO subjects_search (rowid, title_words, introduction_words, content_words) VALUES (NEW.rowid, NEW.title_words, NEW.introduction_words, NEW.content_words);
END;
CREATE TRIGGER subjects_search_delete AFTER DELETE ON subjects BEGIN
    INSERT INTO subjects_titles (subjects_titles, rowid, title_words) VALUES ('delete', OLD.rowid, OLD.title_words);
    INSERT INTO subjects_search (subjects_search, rowid, title_words, introduction_words, content_words) VALUES ('delete', OLD.rowid, OLD.title_words, OLD.introduction_words, OLD.content_words);
END;
CREATE TRIGGER subjects_search_update AFTER UPDATE OF title_words, introduction_words, content_words ON subjects
WHEN OLD.title_words IS NOT NEW.title_words OR OLD.introduction_words IS NOT NEW.introduction_words OR OLD.content_words IS NOT NEW.content_words BEGIN
    INSERT INTO subjects_search (subjects_search, rowid, title_words, introduction_words, content_words) VALUES ('delete', OLD.rowid, OLD.title_words, OLD.introduction_words, OLD.content_words);
    INSERT INTO subjects_search (rowid, title_words, introduction_words, content_words) VALUES (NEW.rowid, NEW.title_words, NEW.introduction_words, NEW.content_words);
    INSERT INTO subjects_titles (subjects_titles, rowid, title_words) VALUES ('delete', OLD.rowid, OLD.title_words);
    INSERT INTO subjects_titles (rowid, title_words) VALUES (NEW.rowid, NEW.title_words);
END;

CREATE VIRTUAL TABLE chapters_search USING fts5(title_words, content_words, content='chapters', tokenize='ascii', detail='column', columnsize=0);
CREATE VIRTUAL TABLE chapters_search_vocab USING fts5vocab(chapters_search, 'row');
CREATE VIRTUAL TABLE chapters_titles USING fts5(title_words, content='chapters', tokenize='ascii', detail='none', columnsize=0);
CREATE VIRTUAL TABLE chapters_titles_vocab USING fts5vocab(chapters_titles, 'row');

CREATE TRIGGER chapters_search_insert AFTER INSERT ON chapters BEGIN
    INSERT INTO chapters_titles (rowid, title_words) VALUES (NEW.rowid, NEW.title_words);
    INSERT INTO chapters_search (rowid, title_words, content_words) VALUES (NEW.rowid, NEW.title_words, NEW.content_words);
END;
CREATE TRIGGER chapters_search_delete AFTER DELETE ON chapters BEGIN
    INSERT INTO chapters_titles (chapters_titles, rowid, title_words) VALUES ('delete', OLD.rowid, OLD.title_words);
    INSERT INTO chapters_search (chapters_search, rowid, title_words, content_words) VALUES ('delete', OLD.rowid, OLD.title_words, OLD.content_words);
END;
CREATE TRIGGER chapters_search_update AFTER UPDATE OF title_words, content_words ON chapters
WHEN OLD.title_words IS NOT NEW.title_words OR OLD.content_words IS NOT NEW.content_words BEGIN
    INSERT INTO chapters_search (chapters_search, rowid, title_words, content_words) VALUES ('delete', OLD.rowid, OLD.title_words, OLD.content_words);
    INSERT INTO chapters_search (rowid, title_words, content_words) VALUES (NEW.rowid, NEW.title_words, NEW.content_words);
    INSERT INTO chapters_titles (chapters_titles, rowid, title_words) VALUES ('delete', OLD.rowid, OLD.title_words);
    INSERT INTO chapters_titles (rowid, title_words) VALUES (NEW.rowid, NEW.title_words);
END;


INSERT INTO modules_search (modules_search) VALUES ('rebuild');
INSERT INTO modules_titles (modules_titles) VALUES ('rebuild');
INSERT INTO subjects_search (subjects_search) VALUES ('rebuild');
INSERT INTO subjects_titles (subjects_titles) VALUES ('rebuild');
INSERT INTO chapters_search (chapters_search) VALUES ('rebuild');
INSERT INTO chapters_titles (chapters_titles) VALUES ('rebuild');
