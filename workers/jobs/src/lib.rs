//! Workers for one-shot commands (`bash`) and tracked background processes (`process`);
//! later vibe workers and download jobs.

pub mod bash;
pub mod output;
pub mod tracked;
