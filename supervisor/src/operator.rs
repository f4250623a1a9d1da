//! `toolvisor operator`: a terminal client for a person. It connects as a question port
//! (`client_kind: operator`, `surface.questions`), shows each `ask_user` question as a
//! numbered card, and takes the answer by option number(s), free text, or `s` to skip.
//!
//! Line-based on purpose: it works in any terminal, in tmux, and over a pipe. Two threads
//! feed one channel (frames from the daemon, lines from the person); the main loop owns the
//! screen. The daemon does not acknowledge an answer, so each answer is followed by a `ping`:
//! frames are handled in order, so an `error` before the `pong` means the answer was refused.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc;

use toolvisor_protocol::ToolError;
use toolvisor_protocol::client::{Client, ClientError, ClientOptions};
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::wire::{
    ClientFrame, ClientKind, DaemonFrame, Question, QuestionAnswer, Surface, Tier,
};

/// Where to connect and which run to answer for.
#[derive(Clone, Debug)]
pub struct OperatorOptions {
    pub socket: PathBuf,
    /// Answer this run's questions; empty: every run's.
    pub run_id: String,
    pub codec: Codec,
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(transparent)]
    Connect(#[from] ClientError),
    #[error("lost the daemon: {0}")]
    Lost(String),
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

#[expect(
    clippy::large_enum_variant,
    reason = "one value per frame read, moved once over a channel to the terminal thread"
)]
enum Input {
    Frame(DaemonFrame),
    Lost(String),
    Line(String),
    Eof,
}

/// What the person's line means for the question on screen.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Answer(QuestionAnswer),
    /// Not an answer; say why and ask again.
    Retry(String),
}

/// Read one line typed for `q`: `s` skips; numbers (separated by spaces or commas) pick
/// options; anything else is free text; a leading `'` sends the rest as text verbatim.
pub fn parse_line(q: &Question, line: &str) -> Parsed {
    let trimmed = line.trim();
    let answer = |selected: Vec<String>, text: Option<String>, skipped: bool| {
        Parsed::Answer(QuestionAnswer {
            question_id: q.question_id,
            selected,
            text,
            skipped,
            no_person: None,
        })
    };
    if trimmed.is_empty() {
        return Parsed::Retry(instructions(q));
    }
    if trimmed.eq_ignore_ascii_case("s") || trimmed == "/skip" {
        return answer(Vec::new(), None, true);
    }
    let n = q.options.len();
    let numbers: Option<Vec<usize>> = (n > 0)
        .then(|| {
            trimmed
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|p| !p.is_empty())
                .map(|p| p.parse::<usize>().ok())
                .collect()
        })
        .flatten();
    if let (Some(numbers), false) = (numbers, trimmed.starts_with('\'')) {
        let mut picked: Vec<usize> = Vec::new();
        for k in numbers {
            if k == 0 || k > n {
                return Parsed::Retry(format!("there is no option {k}: pick 1..{n}"));
            }
            if !picked.contains(&k) {
                picked.push(k);
            }
        }
        if picked.len() > 1 && !q.multi_select {
            return Parsed::Retry(format!(
                "this question takes one option: pick one of 1..{n}"
            ));
        }
        picked.sort_unstable();
        let labels = picked
            .iter()
            .map(|k| q.options[k - 1].label.clone())
            .collect();
        return answer(labels, None, false);
    }
    if !q.allow_free_text {
        return Parsed::Retry(format!(
            "free text is not accepted for this question: answer with a number 1..{n}, or s to skip"
        ));
    }
    let text = trimmed.strip_prefix('\'').unwrap_or(trimmed).trim();
    if text.is_empty() {
        return Parsed::Retry(instructions(q));
    }
    answer(Vec::new(), Some(text.to_string()), false)
}

fn instructions(q: &Question) -> String {
    let n = q.options.len();
    let mut ways = Vec::new();
    match (n, q.multi_select) {
        (0, _) => {}
        (1, _) => ways.push("1 picks the option".to_string()),
        (_, false) => ways.push(format!("pick one number (1..{n})")),
        (_, true) => ways.push(format!(
            "pick one or more numbers (1..{n}, separated by spaces or commas)"
        )),
    }
    if q.allow_free_text {
        ways.push(if n == 0 {
            "type your answer".to_string()
        } else {
            "or type your own answer (start with ' to send digits as text)".to_string()
        });
    }
    ways.push("s skips".into());
    ways.join(" · ")
}

/// The card of question number `number` (the daemon's question id).
pub fn render_card(q: &Question, number: u64) -> String {
    let mut s = String::new();
    let conv = if q.conversation.is_empty() {
        String::new()
    } else {
        format!(" · conversation {}", q.conversation)
    };
    let run = if q.run_id.is_empty() {
        String::new()
    } else {
        format!(" · run {}", q.run_id)
    };
    s.push_str(&format!("\n┌─ Question #{number}{run}{conv}\n"));
    for line in q.question.lines() {
        s.push_str(&format!("│ {line}\n"));
    }
    if let Some(context) = &q.context {
        s.push_str("│\n");
        for (i, line) in context.lines().enumerate() {
            let lead = if i == 0 { "Context: " } else { "         " };
            s.push_str(&format!("│ {lead}{line}\n"));
        }
    }
    if !q.options.is_empty() {
        s.push_str("│\n");
        for (i, o) in q.options.iter().enumerate() {
            match &o.description {
                Some(d) if !d.is_empty() => {
                    s.push_str(&format!("│   {}) {} — {d}\n", i + 1, o.label))
                }
                _ => s.push_str(&format!("│   {}) {}\n", i + 1, o.label)),
            }
        }
    }
    s.push_str("│\n");
    s.push_str(&format!("│ {}\n", instructions(q)));
    s.push_str("└─> ");
    s
}

/// The id in a withdrawal notice (`question <id> was withdrawn: ...`).
fn withdrawn_id(message: &str) -> Option<u64> {
    let rest = message.strip_prefix("question ")?;
    let (id, tail) = rest.split_once(' ')?;
    tail.starts_with("was withdrawn").then(|| id.parse().ok())?
}

struct Card {
    number: u64,
    question: Question,
}

/// Serve a person at a terminal until end of input or `/quit`.
pub fn run(
    options: OperatorOptions,
    input: Box<dyn BufRead + Send>,
    out: &mut dyn Write,
) -> Result<(), OperatorError> {
    let client = Client::connect(
        &options.socket,
        ClientOptions {
            codec: options.codec,
            client_kind: ClientKind::Operator,
            run_id: options.run_id.clone(),
            workdir: String::new(),
            surface: Surface {
                max_tier: Tier::Read,
                approvals: false,
                questions: true,
                bridge_tools: Vec::new(),
            },
            ..ClientOptions::default()
        },
    )?;
    let max_frame = client.welcome().max_frame;
    let writer = client.raw()?;
    let rx = feed(client, input);

    let whose = if options.run_id.is_empty() {
        "every run".to_string()
    } else {
        format!("run {}", options.run_id)
    };
    writeln!(
        out,
        "toolvisor operator: answering questions of {whose} on {} (Ctrl-D or /quit leaves)",
        options.socket.display()
    )?;
    let mut desk = Desk {
        out,
        rx,
        writer,
        codec: options.codec,
        max_frame,
        waiting: VecDeque::new(),
        current: None,
        stash: VecDeque::new(),
        nonce: 0,
        idle_said: false,
    };
    desk.serve()
}

/// One channel fed by two threads: the daemon's frames and the person's lines.
fn feed(client: Client, input: Box<dyn BufRead + Send>) -> mpsc::Receiver<Input> {
    let (tx, rx) = mpsc::channel::<Input>();
    let frames = tx.clone();
    std::thread::spawn(move || {
        let mut client = client;
        loop {
            match client.recv() {
                Ok(frame) => {
                    if frames.send(Input::Frame(frame)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = frames.send(Input::Lost(e.to_string()));
                    return;
                }
            }
        }
    });
    std::thread::spawn(move || {
        for line in input.lines() {
            match line {
                Ok(line) => {
                    if tx.send(Input::Line(line)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Input::Eof);
    });
    rx
}

/// The screen and what is behind it: the question shown, the questions queued, and the
/// inputs set aside while an answer waited for the daemon's word.
struct Desk<'a> {
    out: &'a mut dyn Write,
    rx: mpsc::Receiver<Input>,
    writer: UnixStream,
    codec: Codec,
    max_frame: u32,
    waiting: VecDeque<Card>,
    current: Option<Card>,
    stash: VecDeque<Input>,
    nonce: u64,
    idle_said: bool,
}

impl Desk<'_> {
    /// The main loop: show the next question, handle the next input, until one ends it.
    fn serve(&mut self) -> Result<(), OperatorError> {
        loop {
            if self.current.is_none() {
                if let Some(card) = self.waiting.pop_front() {
                    write!(self.out, "{}", render_card(&card.question, card.number))?;
                    self.current = Some(card);
                    self.idle_said = false;
                } else if !self.idle_said {
                    writeln!(self.out, "\nwaiting for questions…")?;
                    self.idle_said = true;
                }
                self.out.flush()?;
            }
            let next = match self.stash.pop_front() {
                Some(input) => input,
                None => self.rx.recv().unwrap_or(Input::Eof),
            };
            match next {
                Input::Frame(DaemonFrame::Question(q)) => self.queue(q)?,
                Input::Frame(DaemonFrame::Error(e)) => self.daemon_error(&e)?,
                Input::Frame(_) => {}
                Input::Lost(e) => {
                    writeln!(self.out, "\nlost the daemon: {e}")?;
                    return Err(OperatorError::Lost(e));
                }
                Input::Eof => {
                    writeln!(self.out, "\nbye")?;
                    return Ok(());
                }
                Input::Line(line) if line.trim() == "/quit" => {
                    writeln!(self.out, "bye")?;
                    return Ok(());
                }
                Input::Line(line) => self.line(&line)?,
            }
        }
    }

    /// Queues a question behind the one on screen (if any, saying so).
    fn queue(&mut self, q: Question) -> Result<(), OperatorError> {
        // Numbered by the daemon's id, which its `withdrawn` errors, the logs and the
        // asking call's result name too.
        let card = Card {
            number: q.question_id,
            question: q,
        };
        if self.current.is_some() {
            write!(
                self.out,
                "\n(question #{} is waiting after this one)\n└─> ",
                card.number
            )?;
            self.out.flush()?;
        }
        self.waiting.push_back(card);
        Ok(())
    }

    /// A daemon error outside an answer: a withdrawn question leaves the screen or the
    /// queue; anything else is shown.
    fn daemon_error(&mut self, e: &ToolError) -> Result<(), OperatorError> {
        if let Some(id) = withdrawn_id(&e.message) {
            let shown = self
                .current
                .as_ref()
                .is_some_and(|c| c.question.question_id == id);
            if shown {
                let card = self.current.take().expect("shown");
                writeln!(
                    self.out,
                    "\n✗ question #{} {}",
                    card.number,
                    withdrawn_tail(&e.message)
                )?;
            } else if let Some(pos) = self
                .waiting
                .iter()
                .position(|c| c.question.question_id == id)
            {
                let card = self.waiting.remove(pos).expect("found");
                writeln!(
                    self.out,
                    "\n(question #{} {})",
                    card.number,
                    withdrawn_tail(&e.message)
                )?;
                if self.current.is_some() {
                    write!(self.out, "└─> ")?;
                }
            }
        } else {
            writeln!(self.out, "\ndaemon: {e}")?;
        }
        self.out.flush()?;
        Ok(())
    }

    /// A line the person typed: the answer to the question on screen, sent and confirmed.
    fn line(&mut self, line: &str) -> Result<(), OperatorError> {
        let Some(card) = self.current.as_ref() else {
            if !line.trim().is_empty() {
                writeln!(self.out, "(no question is waiting; that line was ignored)")?;
            }
            return Ok(());
        };
        let answer = match parse_line(&card.question, line) {
            Parsed::Retry(why) => {
                write!(self.out, "  ✗ {why}\n└─> ")?;
                self.out.flush()?;
                return Ok(());
            }
            Parsed::Answer(a) => a,
        };
        let summary = if answer.skipped {
            "skipped".to_string()
        } else if let Some(t) = &answer.text {
            format!("answered {t:?}")
        } else {
            format!("answered {}", answer.selected.join(", "))
        };
        self.nonce += 1;
        self.send(&ClientFrame::QuestionAnswer(answer))?;
        self.send(&ClientFrame::Ping { nonce: self.nonce })?;
        let Some(refused) = self.confirmation() else {
            writeln!(
                self.out,
                "  ? the connection ended before the daemon confirmed question #{}'s answer",
                self.current.as_ref().map_or(0, |c| c.number)
            )?;
            self.current = None;
            return Ok(());
        };
        match refused {
            Some(e) if e.kind == toolvisor_protocol::ErrorKind::NotFound => {
                let card = self.current.take().expect("shown");
                writeln!(
                    self.out,
                    "  ✗ question #{} is no longer pending: {}",
                    card.number, e.message
                )?;
            }
            Some(e) => {
                write!(self.out, "  ✗ refused: {}\n└─> ", e.message)?;
            }
            None => {
                let card = self.current.take().expect("shown");
                writeln!(self.out, "  ✓ question #{} {summary}", card.number)?;
            }
        }
        self.out.flush()?;
        Ok(())
    }

    /// Waits for the pong of the last ping: `None` when the connection ended first, else
    /// the error that refused the answer, if one came before it. Other inputs are stashed.
    fn confirmation(&mut self) -> Option<Option<ToolError>> {
        // Wait for the pong; an error before it refused the answer.
        let mut refused = None;
        loop {
            match self.rx.recv() {
                Ok(Input::Frame(DaemonFrame::Pong { nonce: n })) if n == self.nonce => {
                    return Some(refused);
                }
                Ok(Input::Frame(DaemonFrame::Error(e))) if withdrawn_id(&e.message).is_none() => {
                    refused = Some(e)
                }
                Ok(other @ Input::Lost(_)) => {
                    self.stash.push_back(other);
                    return None;
                }
                // End of input: still wait for the daemon's word on this answer.
                Ok(other) => self.stash.push_back(other),
                Err(_) => return None,
            }
        }
    }

    /// Writes one frame to the daemon.
    fn send(&mut self, frame: &ClientFrame) -> Result<(), OperatorError> {
        codec::write_frame(&mut self.writer, self.codec, frame, self.max_frame)
            .map_err(|e| OperatorError::Lost(e.to_string()))
    }
}

fn withdrawn_tail(message: &str) -> &str {
    message
        .split_once(" was ")
        .map(|(_, rest)| rest)
        .map(|rest| rest.trim_start_matches("withdrawn"))
        .map(|rest| rest.trim_start_matches(':').trim())
        .map(|why| if why.is_empty() { "was withdrawn" } else { why })
        .unwrap_or(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolvisor_protocol::wire::QuestionOption;

    fn q(n: usize, multi: bool, free: bool) -> Question {
        Question {
            question_id: 4,
            run_id: "r".into(),
            conversation: "c".into(),
            question: "Which?".into(),
            context: Some("because".into()),
            options: (1..=n)
                .map(|i| QuestionOption {
                    label: format!("opt{i}"),
                    description: (i == 1).then(|| "the first".to_string()),
                })
                .collect(),
            allow_free_text: free,
            multi_select: multi,
        }
    }

    fn picked(p: Parsed) -> Vec<String> {
        match p {
            Parsed::Answer(a) => a.selected,
            Parsed::Retry(why) => panic!("retry: {why}"),
        }
    }

    #[test]
    fn lines_become_answers() {
        let single = q(3, false, false);
        assert_eq!(picked(parse_line(&single, " 2 ")), ["opt2"]);
        assert!(matches!(parse_line(&single, "1 2"), Parsed::Retry(w) if w.contains("takes one")));
        assert!(matches!(parse_line(&single, "7"), Parsed::Retry(w) if w.contains("no option 7")));
        assert!(
            matches!(parse_line(&single, "mine"), Parsed::Retry(w) if w.contains("free text is not accepted"))
        );
        assert!(matches!(parse_line(&single, "s"), Parsed::Answer(a) if a.skipped));
        let multi = q(3, true, true);
        assert_eq!(picked(parse_line(&multi, "3, 1 3")), ["opt1", "opt3"]);
        match parse_line(&multi, "'42") {
            Parsed::Answer(a) => assert_eq!(a.text.as_deref(), Some("42")),
            other => panic!("{other:?}"),
        }
        match parse_line(&q(0, false, true), "12") {
            Parsed::Answer(a) => {
                assert_eq!(a.text.as_deref(), Some("12"), "no options: digits are text")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_card_numbers_its_options_and_says_how_to_answer() {
        let card = render_card(&q(2, false, true), 3);
        assert!(
            card.contains("Question #3 · run r · conversation c"),
            "{card}"
        );
        assert!(card.contains("1) opt1 — the first"), "{card}");
        assert!(card.contains("2) opt2\n"), "{card}");
        assert!(card.contains("Context: because"), "{card}");
        assert!(card.contains("s skips"), "{card}");
        assert_eq!(
            withdrawn_id("question 12 was withdrawn: no answer within 1 s"),
            Some(12)
        );
        assert_eq!(withdrawn_id("question 12 was sent to another client"), None);
        assert_eq!(
            withdrawn_tail("question 12 was withdrawn: no answer within 1 s"),
            "no answer within 1 s"
        );
    }
}
