//! The HTTP routes of a run's listeners: the router ([`router`]: which route, which role may use
//! it, which listener serves it), what agents send for a pair ([`pairs`]), enrollment
//! ([`enroll`]), downloads ([`downloads`]), and what they share ([`http`], which the fleet's
//! routes use too). Above the serving run (`live`), which they drive; the listeners that carry
//! them are `serving`.

pub(crate) mod downloads;
pub(crate) mod enroll;
pub(crate) mod http;
pub(crate) mod pairs;
pub(crate) mod router;
