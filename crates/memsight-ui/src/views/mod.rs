//! The views of an open file, each drawing one part of the window from a document's state: the
//! lifecycle chart, the pool-state chart, the event list, the live blocks (`blocks`), segments
//! over time (`segments`), the findings; and a profiler run's
//! curves and tables; two files compared (`compare`); the what-if replay (`whatif`); memory by
//! owner (`owners`, msMemScope recordings). Views know nothing of menus, dialogs or tabs (`app`), and read the data
//! through `Prepared` only.

pub mod axes;
pub mod blocks;
pub mod compare;
pub mod event_list;
pub mod findings;
pub mod lifecycle;
pub mod memscope_compare;
pub mod owners;
pub mod pool;
pub mod profiler;
pub mod segments;
pub mod whatif;
