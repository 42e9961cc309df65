//! Snapshots written by hand in tests: a Python value as a snapshot holds it, pickled with the
//! generator's writer and loaded as a user's file would be. Shared by the tests that build their
//! own inputs (`handmade`, `unseen`), so that their figures come from the construction.

use std::path::Path;

use memsight_core::r#gen::PickleWriter;
use memsight_core::{Loaded, load_bytes};

/// A Python value, as a snapshot holds them.
#[derive(Clone)]
pub enum Py {
    Int(i128),
    Str(&'static str),
    List(Vec<Py>),
    Dict(Vec<(&'static str, Py)>),
    Pair(i128, i128),
}

fn write(w: &mut PickleWriter<Vec<u8>>, value: &Py) {
    match value {
        Py::Int(i) => w.int(*i),
        Py::Str(s) => w.str(s),
        Py::Pair(a, b) => w.pair(*a, *b),
        Py::List(items) => {
            w.begin_list();
            for item in items {
                w.item().expect("in memory");
                write(w, item);
                w.end_list_item();
            }
            w.end_list();
        }
        Py::Dict(entries) => {
            w.begin_dict();
            for (key, item) in entries {
                w.entry(key, |w| write(w, item)).expect("in memory");
            }
            w.end_dict();
        }
    }
}

pub fn load(top: &Py) -> Loaded {
    let mut w = PickleWriter::new(Vec::new(), 4).expect("in memory");
    write(&mut w, top);
    let bytes = w.finish().expect("in memory");
    Loaded::new(load_bytes(&bytes, Path::new("written.pickle")).unwrap_or_else(|e| panic!("{e}")))
}
