-- coursed schema, SQLite: the index of all texts of a table (`{table}_search`, made by
-- migration 3) keeps which rows hold a word, no longer in which column (detail=none instead of
-- column). Nothing asked it for a column but a search of a prefix for the rows whose title
-- holds every term, which the titles' own index (`{table}_titles`) answers as well. The index
-- shrinks to less than a third (the benchmark's 10,000 subjects: 3.8 MiB to 1.2 MiB), so a
-- write adds less to it, merges less and writes fewer pages.
--
-- The triggers of migration 3 name the indexes, not their settings: they work on the new
-- indexes unchanged. Each index is rebuilt from the words columns. An index the database lacks
-- (dropped, as bench/search.py does to measure writes without it) is left out: made again
-- without its triggers it would go stale.

-- coursed: where this table exists: modules_search
DROP TABLE modules_search_vocab;
DROP TABLE modules_search;
CREATE VIRTUAL TABLE modules_search USING fts5(title_words, introduction_words, content_words, content='modules', tokenize='ascii', detail='none', columnsize=0);
CREATE VIRTUAL TABLE modules_search_vocab USING fts5vocab(modules_search, 'row');
INSERT INTO modules_search (modules_search) VALUES ('rebuild');

-- coursed: where this table exists: subjects_search
DROP TABLE subjects_search_vocab;
DROP TABLE subjects_search;
CREATE VIRTUAL TABLE subjects_search USING fts5(title_words, introduction_words, content_words, content='subjects', tokenize='ascii', detail='none', columnsize=0);
CREATE VIRTUAL TABLE subjects_search_vocab USING fts5vocab(subjects_search, 'row');
INSERT INTO subjects_search (subjects_search) VALUES ('rebuild');

-- coursed: where this table exists: chapters_search
DROP TABLE chapters_search_vocab;
DROP TABLE chapters_search;
CREATE VIRTUAL TABLE chapters_search USING fts5(title_words, content_words, content='chapters', tokenize='ascii', detail='none', columnsize=0);
CREATE VIRTUAL TABLE chapters_search_vocab USING fts5vocab(chapters_search, 'row');
INSERT INTO chapters_search (chapters_search) VALUES ('rebuild');
