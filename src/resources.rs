//! The registry: each resource type declared once.
//!
//! A declaration names the table, the attributes (kind, rules, sortable, filterable) and the
//! relationships. Routing, SQL, validation, serialization, include, sparse fieldsets and the
//! OpenAPI document are all driven from here. A relationship points at a [`ForeignKey`]; the
//! same key serves both directions (the to-one side holds the column, the to-many side is the
//! set of rows whose column names it), so `subjects.module` and `modules.subjects` can never
//! disagree.

/// The JSON and storage kind of an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string, never null; defaults to `""` unless required.
    Text,
    /// A string or null; defaults to null.
    NullableText,
    /// A boolean stored as 0/1; defaults to false.
    Bool,
    /// An integer; defaults to 0.
    Integer,
    /// An RFC 3339 timestamp set by the server; read-only.
    Timestamp,
}

/// How a searchable attribute's text becomes words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Searchable {
    /// The column holding the attribute's words.
    pub column: &'static str,
    /// The text is HTML: markup is not searchable text (tags removed, entities decoded).
    pub html: bool,
    /// At most this many bytes of words are kept (whole words): the rest of a very long text is
    /// not searchable. Together they stay under PostgreSQL's 1 MB limit of a `tsvector`.
    pub max_bytes: usize,
}

#[derive(Debug)]
pub struct Attribute {
    /// The JSON member name, which is also the column name.
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    /// Text: whitespace is trimmed off before checking and storing.
    pub trim: bool,
    /// Text: minimum characters; Integer: minimum value.
    pub min: i64,
    /// Text: maximum characters.
    pub max: i64,
    /// Text: maximum UTF-8 bytes.
    pub max_bytes: i64,
    /// Unique per type when not null (a duplicate is a 409).
    pub unique: bool,
    pub sortable: bool,
    /// Accepted as `filter[name]` (exact match).
    pub filterable: bool,
    /// Searched by `filter[search]`: how its text becomes the words of its words column.
    pub search: Option<Searchable>,
    pub doc: &'static str,
}

impl Attribute {
    const fn new(name: &'static str, kind: Kind, doc: &'static str) -> Attribute {
        Attribute {
            name,
            kind,
            required: false,
            trim: false,
            min: 0,
            max: i64::MAX,
            max_bytes: i64::MAX,
            unique: false,
            sortable: false,
            filterable: false,
            search: None,
            doc,
        }
    }
    const fn text(name: &'static str, doc: &'static str) -> Attribute {
        Attribute::new(name, Kind::Text, doc)
    }
    /// A required, trimmed title of 1 to 255 characters, sortable.
    const fn title() -> Attribute {
        let mut a = Attribute::text("title", "Title; 1 to 255 characters after trimming.");
        a.required = true;
        a.trim = true;
        a.min = 1;
        a.max = 255;
        a.sortable = true;
        a.search = Some(Searchable { column: "title_words", html: false, max_bytes: 32 << 10 });
        a
    }
    /// The identifier from the client's own system: optional, unique, exact-match filter.
    const fn external_id() -> Attribute {
        let mut a = Attribute::new(
            "external_id",
            Kind::NullableText,
            "Identifier assigned by the client's own system; unique per type when not null.",
        );
        a.max = 255;
        a.unique = true;
        a.sortable = true;
        a.filterable = true;
        a
    }
    const fn max(mut self, max: i64) -> Attribute {
        self.max = max;
        self
    }
    /// Searched, its words kept in `column`, at most `max_bytes` of them; `html` when the text
    /// is HTML.
    const fn searched(mut self, column: &'static str, html: bool, max_bytes: usize) -> Attribute {
        self.search = Some(Searchable { column, html, max_bytes });
        self
    }
    const fn max_bytes(mut self, max: i64) -> Attribute {
        self.max_bytes = max;
        self
    }
    const fn filterable(mut self) -> Attribute {
        self.filterable = true;
        self
    }
    const fn sortable(mut self) -> Attribute {
        self.sortable = true;
        self
    }
    const fn timestamp(name: &'static str, doc: &'static str) -> Attribute {
        Attribute::new(name, Kind::Timestamp, doc).sortable()
    }
    pub fn read_only(&self) -> bool {
        self.kind == Kind::Timestamp
    }
}

/// A foreign-key column `child.column` naming a `parent` row.
#[derive(Debug)]
pub struct ForeignKey {
    pub child: &'static ResourceType,
    pub column: &'static str,
    pub parent: &'static ResourceType,
    /// Nullable: deleting the parent sets the column to null. Not null: the child must always
    /// have a parent (it is required on create) and is deleted with it.
    pub nullable: bool,
    /// The order of one parent's children (linkage, related collections, include), as SQL.
    pub children_order: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cardinality {
    /// The side that holds the column (`subjects.module`).
    ToOne,
    /// The side named by the column (`modules.subjects`).
    ToMany,
}

#[derive(Debug)]
pub struct Relationship {
    pub name: &'static str,
    pub fk: &'static ForeignKey,
    pub cardinality: Cardinality,
}

impl Relationship {
    /// The type of the resources this relationship links to.
    pub fn target(&self) -> &'static ResourceType {
        match self.cardinality {
            Cardinality::ToOne => self.fk.parent,
            Cardinality::ToMany => self.fk.child,
        }
    }
    pub fn is_to_one(&self) -> bool {
        self.cardinality == Cardinality::ToOne
    }
    /// The relationship of the target that is the other side of this one.
    pub fn inverse(&self) -> &'static Relationship {
        let target = self.target();
        target
            .relationships
            .iter()
            .find(|r| std::ptr::eq(r.fk, self.fk) && r.cardinality != self.cardinality)
            .expect("every foreign key is declared on both sides")
    }
}

#[derive(Debug)]
pub struct ResourceType {
    /// The JSON:API type and the path segment.
    pub name: &'static str,
    pub table: &'static str,
    /// Writable attributes first, then the read-only timestamps.
    pub attributes: &'static [Attribute],
    pub relationships: &'static [Relationship],
    pub doc: &'static str,
}

impl ResourceType {
    pub fn attribute(&self, name: &str) -> Option<&'static Attribute> {
        let attrs: &'static [Attribute] = self.attributes;
        attrs.iter().find(|a| a.name == name)
    }
    pub fn relationship(&self, name: &str) -> Option<&'static Relationship> {
        let rels: &'static [Relationship] = self.relationships;
        rels.iter().find(|r| r.name == name)
    }
    /// To-one relationships: their columns are read with the row, and each is a filter.
    pub fn to_one(&self) -> impl Iterator<Item = &'static Relationship> {
        let rels: &'static [Relationship] = self.relationships;
        rels.iter().filter(|r| r.is_to_one())
    }
    /// The fields `sort` accepts: `id`, then the sortable attributes (each also its column).
    pub fn sort_fields(&self) -> impl Iterator<Item = &'static str> {
        let attrs: &'static [Attribute] = self.attributes;
        std::iter::once("id").chain(attrs.iter().filter(|a| a.sortable).map(|a| a.name))
    }
}

const CREATED_AT: Attribute = Attribute::timestamp("created_at", "Set by the server when the resource is created.");
const UPDATED_AT: Attribute =
    Attribute::timestamp("updated_at", "Set by the server whenever the resource's row changes.");
const INTRODUCTION: Attribute = Attribute::text("introduction", "Introduction text; up to 65,535 characters.")
    .max(65_535)
    .searched("introduction_words", false, 192 << 10);
const MAX_CONTENT: i64 = 1 << 20;
/// The words of a content kept for search: with those of a title and an introduction, under
/// PostgreSQL's limit of a `tsvector` (1 MB of distinct words).
const CONTENT_WORDS: usize = 768 << 10;

pub static MODULES: ResourceType = ResourceType {
    name: "modules",
    table: "modules",
    attributes: &[
        Attribute::title(),
        INTRODUCTION,
        Attribute::text("content", "Content, may hold HTML (stored and returned verbatim); up to 1 MiB.")
            .max_bytes(MAX_CONTENT)
            .searched("content_words", true, CONTENT_WORDS),
        Attribute::external_id(),
        CREATED_AT,
        UPDATED_AT,
    ],
    relationships: &[Relationship { name: "subjects", fk: &SUBJECT_MODULE, cardinality: Cardinality::ToMany }],
    doc: "A module groups subjects.",
};

pub static SUBJECTS: ResourceType = ResourceType {
    name: "subjects",
    table: "subjects",
    attributes: &[
        Attribute::title(),
        INTRODUCTION,
        Attribute::text("content", "Content, may be empty; up to 1 MiB.").max_bytes(MAX_CONTENT).searched(
            "content_words",
            false,
            CONTENT_WORDS,
        ),
        Attribute::external_id(),
        Attribute::new("available_for_courses", Kind::Bool, "Whether courses may use this subject.").filterable(),
        CREATED_AT,
        UPDATED_AT,
    ],
    relationships: &[
        Relationship { name: "module", fk: &SUBJECT_MODULE, cardinality: Cardinality::ToOne },
        Relationship { name: "chapters", fk: &CHAPTER_SUBJECT, cardinality: Cardinality::ToMany },
    ],
    doc: "A subject belongs to at most one module and has chapters.",
};

pub static CHAPTERS: ResourceType = ResourceType {
    name: "chapters",
    table: "chapters",
    attributes: &[
        Attribute::title(),
        Attribute::text("content", "Content, may be empty; up to 1 MiB.").max_bytes(MAX_CONTENT).searched(
            "content_words",
            false,
            CONTENT_WORDS,
        ),
        Attribute::new("position", Kind::Integer, "Order of the chapter within its subject; 0 or more.").sortable(),
        CREATED_AT,
        UPDATED_AT,
    ],
    relationships: &[Relationship { name: "subject", fk: &CHAPTER_SUBJECT, cardinality: Cardinality::ToOne }],
    doc: "A chapter belongs to exactly one subject.",
};

static SUBJECT_MODULE: ForeignKey =
    ForeignKey { child: &SUBJECTS, column: "module_id", parent: &MODULES, nullable: true, children_order: "id" };

static CHAPTER_SUBJECT: ForeignKey = ForeignKey {
    child: &CHAPTERS,
    column: "subject_id",
    parent: &SUBJECTS,
    nullable: false,
    children_order: "position, id",
};

/// Every resource type the API serves.
pub static TYPES: [&ResourceType; 3] = [&MODULES, &SUBJECTS, &CHAPTERS];

/// The resource type served under the path segment `name`.
pub fn by_name(name: &str) -> Option<&'static ResourceType> {
    TYPES.iter().copied().find(|t| t.name == name)
}
