-- coursed schema, PostgreSQL: full-text search (src/search).
--
-- Each searchable attribute has a words column: its text as search words, computed by coursed
-- in every statement that writes the text (see migrations/sqlite/0003-search.sql). `search`
-- is a tsvector made of those words as lexemes, as they are (array_to_tsvector: no parser, no
-- dictionary, so PostgreSQL's language rules never enter), kept by PostgreSQL itself as a
-- generated column in the row's own write, and indexed with GIN. Phrases are checked on the
-- words columns, which the tsvector (without positions) cannot do.
--
-- The words of rows that existed before this migration are computed by coursed right after
-- it, in the same transaction.


ALTER TABLE modules
    ADD COLUMN title_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN introduction_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN content_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN search tsvector NOT NULL GENERATED ALWAYS AS (array_to_tsvector(string_to_array(title_words, ' ') || string_to_array(introduction_words, ' ') || string_to_array(content_words, ' '))) STORED;
CREATE INDEX modules_search ON modules USING gin (search);

ALTER TABLE subjects
    ADD COLUMN title_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN introduction_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN content_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN search tsvector NOT NULL GENERATED ALWAYS AS (array_to_tsvector(string_to_array(title_words, ' ') || string_to_array(introduction_words, ' ') || string_to_array(content_words, ' '))) STORED;
CREATE INDEX subjects_search ON subjects USING gin (search);

ALTER TABLE chapters
    ADD COLUMN title_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN content_words text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN search tsvector NOT NULL GENERATED ALWAYS AS (array_to_tsvector(string_to_array(title_words, ' ') || string_to_array(content_words, ' '))) STORED;
CREATE INDEX chapters_search ON chapters USING gin (search);

DO $$
BEGIN
    ALTER TABLE modules ALTER COLUMN introduction_words SET COMPRESSION lz4, ALTER COLUMN content_words SET COMPRESSION lz4;
    ALTER TABLE subjects ALTER COLUMN introduction_words SET COMPRESSION lz4, ALTER COLUMN content_words SET COMPRESSION lz4;
    ALTER TABLE chapters ALTER COLUMN content_words SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available; search words keep the default compression';
END $$;
