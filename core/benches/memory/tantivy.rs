//! The same facts in tantivy (in RAM, tantivy's BM25): the comparison the
//! memory bench reports beside core's own index. Words are read as core
//! reads them: lowercased, core's stop words dropped, Snowball English
//! stems.

use std::collections::HashSet;

use agent_host_core::memory::terms::STOP_WORDS;
use agent_host_core::memory::{Fact, REPLY_WEIGHT};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{FAST, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, TantivyDocument};

/// Facts indexed in tantivy: the text and its fields in one field, what the
/// fact answered in another searched at [`REPLY_WEIGHT`].
pub struct Tantivy {
    reader: IndexReader,
    parser: QueryParser,
    /// Each fact's source message, by the number stored with it.
    sources: Vec<Option<String>>,
}

impl Tantivy {
    /// Indexes `facts` (numbered in their order).
    pub fn new<'a>(facts: impl IntoIterator<Item = &'a Fact>) -> Tantivy {
        let mut schema = Schema::builder();
        let options = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("core")
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let text = schema.add_text_field("text", options.clone());
        let reply = schema.add_text_field("reply", options);
        let number = schema.add_u64_field("number", FAST);
        let index = Index::create_in_ram(schema.build());
        index.tokenizers().register(
            "core",
            TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(RemoveLongFilter::limit(64))
                .filter(LowerCaser)
                .filter(StopWordFilter::remove(
                    STOP_WORDS.iter().map(|w| (*w).to_owned()),
                ))
                .filter(Stemmer::new(Language::English))
                .build(),
        );
        let mut writer: IndexWriter = index
            .writer_with_num_threads(1, 200_000_000)
            .expect("a writer");
        let mut sources = Vec::new();
        for fact in facts {
            let mut doc = TantivyDocument::default();
            doc.add_text(text, indexed_text(fact));
            if let Some(answered) = &fact.reply_to {
                doc.add_text(reply, answered);
            }
            doc.add_u64(number, sources.len() as u64);
            sources.push(fact.source.message.clone());
            writer.add_document(doc).expect("a document");
        }
        writer.commit().expect("a commit");
        writer.wait_merging_threads().expect("merges end");
        let reader = index.reader().expect("a reader");
        let mut parser = QueryParser::for_index(&index, vec![text, reply]);
        parser.set_field_boost(reply, REPLY_WEIGHT);
        Tantivy {
            reader,
            parser,
            sources,
        }
    }

    /// The numbers of the best facts for `query`, at most one per source
    /// message, at most `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<u64> {
        let searcher = self.reader.searcher();
        let (query, _) = self.parser.parse_query_lenient(&plain(query));
        let top = searcher
            .search(&query, &TopDocs::with_limit(limit * 4).order_by_score())
            .expect("a search");
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (_, address) in top {
            let column = searcher
                .segment_reader(address.segment_ord)
                .fast_fields()
                .u64("number")
                .expect("the number column");
            let Some(number) = column.first(address.doc_id) else {
                continue;
            };
            let source = self.sources[number as usize].as_deref();
            if source.is_none_or(|s| seen.insert(s)) {
                out.push(number);
            }
            if out.len() == limit {
                break;
            }
        }
        out
    }

    /// The source message of fact `number`.
    pub fn source(&self, number: u64) -> Option<&str> {
        self.sources[number as usize].as_deref()
    }
}

/// What core's index holds of a fact at full weight.
fn indexed_text(fact: &Fact) -> String {
    let mut out = format!("{} {}", fact.entity, fact.text);
    for piece in fact
        .attribute
        .iter()
        .chain(&fact.value)
        .chain(&fact.mentions)
        .chain(&fact.dates)
        .chain(&fact.context)
    {
        out.push(' ');
        out.push_str(piece);
    }
    out
}

/// The question as plain words: tantivy's query language would read `:`,
/// quotes, `-` and the like as operators.
fn plain(query: &str) -> String {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
