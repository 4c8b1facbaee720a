-- coursed schema, PostgreSQL: how many rows hold each search word, so that the total of a
-- one-word search is a lookup instead of a count of its matches (a word that most rows hold
-- has hundreds of thousands of matches on a large catalogue, and a GIN index cannot count
-- without building a bitmap of them and reading every row it names).
--
-- `search_words` holds, per table and word, the rows holding the word, as of the changes
-- folded into it. Every insert, delete, and update that changes a row's words appends the row's
-- words to `search_changes` (with sign -1 for the words it had, +1 for the words it has), in
-- the writing transaction: one small insert per row written, never a hot row shared by
-- concurrent writers. A server folds the oldest changes into `search_words` in the background
-- (src/store/postgres/search.rs), deleting them in the same transaction: whatever snapshot a
-- reader has, it sees a change either in `search_changes` or in `search_words`, never both or
-- neither, so that the count of a word is exact at any moment:
--   search_words.n + the signs of the changes holding the word.

CREATE TABLE search_words (
    tbl  text COLLATE "C" NOT NULL,
    word text COLLATE "C" NOT NULL,
    n    bigint NOT NULL,
    PRIMARY KEY (tbl, word)
);

CREATE TABLE search_changes (
    id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tbl   text COLLATE "C" NOT NULL,
    sign  smallint NOT NULL,
    words tsvector NOT NULL
);

CREATE FUNCTION search_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.search <> ''::tsvector THEN
        INSERT INTO search_changes (tbl, sign, words) VALUES (TG_TABLE_NAME, -1, OLD.search);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.search <> ''::tsvector THEN
        INSERT INTO search_changes (tbl, sign, words) VALUES (TG_TABLE_NAME, 1, NEW.search);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER modules_search_changed AFTER INSERT OR DELETE ON modules
    FOR EACH ROW EXECUTE FUNCTION search_changed();
CREATE TRIGGER modules_search_updated AFTER UPDATE ON modules
    FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search) EXECUTE FUNCTION search_changed();
CREATE TRIGGER subjects_search_changed AFTER INSERT OR DELETE ON subjects
    FOR EACH ROW EXECUTE FUNCTION search_changed();
CREATE TRIGGER subjects_search_updated AFTER UPDATE ON subjects
    FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search) EXECUTE FUNCTION search_changed();
CREATE TRIGGER chapters_search_changed AFTER INSERT OR DELETE ON chapters
    FOR EACH ROW EXECUTE FUNCTION search_changed();
CREATE TRIGGER chapters_search_updated AFTER UPDATE ON chapters
    FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search) EXECUTE FUNCTION search_changed();

-- Counts the words of the rows that exist, from nothing: run below, and by a bulk load at its
-- end (which loads with these triggers off).
CREATE FUNCTION search_recount() RETURNS void LANGUAGE sql AS $$
    DELETE FROM search_changes;
    DELETE FROM search_words;
    INSERT INTO search_words (tbl, word, n)
        SELECT 'modules', w, count(*) FROM modules, unnest(tsvector_to_array(search)) AS w GROUP BY w
        UNION ALL SELECT 'subjects', w, count(*) FROM subjects, unnest(tsvector_to_array(search)) AS w GROUP BY w
        UNION ALL SELECT 'chapters', w, count(*) FROM chapters, unnest(tsvector_to_array(search)) AS w GROUP BY w;
$$;
SELECT search_recount();
