//! Workers for one-shot commands (`bash`), tracked background processes (`process`) and
//! background vibe workers (`vibe_*`); later download jobs.

#![forbid(unsafe_code)]

pub mod bash;
pub mod output;
pub mod tracked;
pub mod vibe;
