-- coursed schema, PostgreSQL: an index of the words of the titles alone, for the first tier of
-- best match first (the rows whose title holds every term), as SQLite's `{table}_titles`. The
-- GIN index of all texts cannot tell which of a word's rows hold it in the title: finding the
-- first tier's rows, or how many there are, then meant reading every row holding the word
-- (122,106 of 150,000 chapters for `content` in bench/search-relevance.sh); with this index,
-- the first tier's own (16,316 there).
--
-- An index on an expression of the title's words (the same tsvector of the words as they are as
-- the `search` column's, see 0003-search.sql), not a stored column: the table is not rewritten,
-- and a write only adds the few words of a title to it.

CREATE INDEX modules_titles ON modules USING gin (array_to_tsvector(string_to_array(title_words, ' ')));
CREATE INDEX subjects_titles ON subjects USING gin (array_to_tsvector(string_to_array(title_words, ' ')));
CREATE INDEX chapters_titles ON chapters USING gin (array_to_tsvector(string_to_array(title_words, ' ')));
