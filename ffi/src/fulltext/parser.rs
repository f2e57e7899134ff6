//! The query language of MATCH ... AGAINST, as InnoDB's FTS parser reads it
//! (storage/innobase/fts/fts0blex.l, fts0tlex.l, fts0pars.y, fts0ast.cc): the same
//! tokens, the same tree and the same syntax errors, with bison's messages.
//!
//! Grammar (boolean mode; natural language mode has the same grammar, but its lexer
//! only knows terms, `"phrases"` and a lone `*`):
//!
//! ```text
//! query    : expr_lst
//! expr_lst : (empty) | expr_lst expr | expr_lst sub_expr
//! sub_expr : '(' expr_lst ')' | prefix '(' expr_lst ')'
//! expr     : term | text | term '*' | text '@' NUMB
//!          | prefix term | prefix term '*' | prefix text | prefix text '@' NUMB
//! prefix   : '-' | '+' | '~' | '<' | '>'
//! term     : TERM | NUMB | '*' term
//! text     : TEXT
//! ```
//!
//! The tree keeps the grammar's shape (a list per `prefix expr`, a list wrapping the
//! list before each sub-expression), since InnoDB's evaluation order follows it.
use super::tokenizer::{words, Settings};

/// Boolean operators (`fts_ast_oper_t`), with the two "skip" marks the visit uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oper {
    None,
    Ignore,
    Exist,
    Negate,
    DecrRating,
    IncrRating,
    ExistSkip,
    IgnoreSkip,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Oper,
    Term {
        word: String,
        wildcard: bool,
    },
    /// A phrase; `distance` from `@N` (proximity).
    Text {
        text: String,
        distance: Option<u64>,
    },
    List(Vec<usize>),
    SubExp(Vec<usize>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: Kind,
    /// An operator node's operator; a list's operator remembered by the visit.
    pub oper: Oper,
    pub visited: bool,
}

/// The parsed query: nodes in an arena, `root` the top list (None: empty query).
#[derive(Debug, Default)]
pub struct Ast {
    pub nodes: Vec<Node>,
    pub root: Option<usize>,
}

impl Ast {
    fn add(&mut self, kind: Kind, oper: Oper) -> usize {
        self.nodes.push(Node {
            kind,
            oper,
            visited: false,
        });
        self.nodes.len() - 1
    }

    fn list(&mut self, first: Option<usize>) -> usize {
        self.add(Kind::List(first.into_iter().collect()), Oper::None)
    }

    fn push(&mut self, list: usize, elem: Option<usize>) {
        if let (Some(e), Kind::List(v) | Kind::SubExp(v)) = (elem, &mut self.nodes[list].kind) {
            v.push(e);
        }
    }

    /// `fts_ast_term_set_wildcard`: on the term, or a word list's last term.
    fn set_wildcard(&mut self, node: Option<usize>) {
        let Some(mut n) = node else { return };
        if let Kind::List(v) = &self.nodes[n].kind {
            match v.last() {
                Some(&last) => n = last,
                None => return,
            }
        }
        if let Kind::Term { wildcard, .. } = &mut self.nodes[n].kind {
            *wildcard = true;
        }
    }

    fn set_distance(&mut self, node: Option<usize>, d: u64) {
        if let Some(n) = node {
            if let Kind::Text { distance, .. } = &mut self.nodes[n].kind {
                *distance = Some(d);
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Term(String),
    Numb(String),
    Text(String),
    Op(char),
    End,
}

impl Tok {
    fn name(&self) -> String {
        match self {
            Tok::Term(_) => "FTS_TERM".into(),
            Tok::Numb(_) => "FTS_NUMB".into(),
            Tok::Text(_) => "FTS_TEXT".into(),
            Tok::Op(c) => format!("'{c}'"),
            Tok::End => "$end".into(),
        }
    }
}

/// The lexers (flex: longest match, then the first rule).
fn lex(q: &str, boolean: bool) -> Vec<Tok> {
    let c: Vec<char> = q.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let run = |i: usize, f: &dyn Fn(char) -> bool| c[i..].iter().take_while(|&&x| f(x)).count();
    while i < c.len() {
        let ws = run(i, &|x| x == '\t' || x == ' ');
        let term = if boolean {
            run(i, &|x| !"\" \n*()+-<>~@%".contains(x))
        } else {
            run(i, &|x| !"\" \n%".contains(x))
        };
        let numb = if boolean {
            run(i, &|x| x.is_ascii_digit())
        } else {
            0
        };
        let op = if boolean {
            usize::from("*()+-<>~@".contains(c[i]))
        } else {
            usize::from(c[i] == '*')
        };
        let text = if c[i] == '"' {
            c[i + 1..]
                .iter()
                .position(|&x| x == '"' || x == '\n')
                .filter(|&p| c[i + 1 + p] == '"')
                .map_or(0, |p| p + 2)
        } else {
            0
        };
        // Rule order: whitespace, operator, number, term, text.
        let best = ws.max(op).max(numb).max(term).max(text);
        if best == 0 {
            // '\n', '%', a lone '"': skipped (flex's default rule echoes them).
            i += 1;
            continue;
        }
        let s: String = c[i..i + best].iter().collect();
        if ws == best {
        } else if op == best {
            out.push(Tok::Op(c[i]));
        } else if numb == best {
            out.push(Tok::Numb(s));
        } else if term == best {
            out.push(Tok::Term(s));
        } else {
            out.push(Tok::Text(s));
        }
        i += best;
    }
    out.push(Tok::End);
    out
}

pub struct SyntaxError(pub String);

struct Parser<'a> {
    toks: Vec<Tok>,
    at: usize,
    ast: Ast,
    settings: &'a Settings,
    fold_case: bool,
}

const PREFIXES: &str = "+-~<>";

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.at.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        self.at += 1;
        t
    }

    fn unexpected(&self, expecting: &[&str]) -> SyntaxError {
        let mut m = format!("syntax error, unexpected {}", self.peek().name());
        // bison lists at most four expected tokens.
        if !expecting.is_empty() && expecting.len() <= 4 {
            m.push_str(", expecting ");
            m.push_str(&expecting.join(" or "));
        }
        SyntaxError(m)
    }

    /// `fts_ast_create_node_term`: the term's words; the first kept whatever its
    /// length (up to the maximum), later ones only within the token sizes.
    fn term_node(&mut self, s: &str) -> Option<usize> {
        let ws = words(s, 0, self.fold_case, self.settings.elision).0;
        let mut first = None;
        let mut list = None;
        for w in ws {
            let n = w.text.chars().count();
            if (first.is_some() && n < self.settings.min_token) || n > self.settings.max_token {
                continue;
            }
            let node = self.ast.add(
                Kind::Term {
                    word: w.text,
                    wildcard: false,
                },
                Oper::None,
            );
            match first {
                None => first = Some(node),
                Some(f) => {
                    let l = *list.get_or_insert_with(|| self.ast.list(Some(f)));
                    self.ast.push(l, Some(node));
                }
            }
        }
        list.or(first)
    }

    /// term : TERM | NUMB | '*' term
    fn term(&mut self) -> Result<Option<usize>, SyntaxError> {
        match self.next() {
            Tok::Term(s) | Tok::Numb(s) => Ok(self.term_node(&s)),
            Tok::Op('*') => {
                if !matches!(self.peek(), Tok::Term(_) | Tok::Numb(_) | Tok::Op('*')) {
                    return Err(self.unexpected(&["FTS_TERM", "FTS_NUMB", "'*'"]));
                }
                self.term()
            }
            // Callers only come here on a term token.
            _ => Err(SyntaxError("syntax error".into())),
        }
    }

    fn text(&mut self) -> Option<usize> {
        let Tok::Text(s) = self.next() else {
            return None;
        };
        // Without its quotes; `""` is no phrase.
        let inner: String = s.chars().skip(1).take(s.chars().count() - 2).collect();
        if inner.is_empty() {
            return None;
        }
        Some(self.ast.add(
            Kind::Text {
                text: inner,
                distance: None,
            },
            Oper::None,
        ))
    }

    /// An expression starting at a term or a text (after its prefix, if any).
    fn operand(&mut self) -> Result<Option<usize>, SyntaxError> {
        if matches!(self.peek(), Tok::Text(_)) {
            let t = self.text();
            if self.peek() == &Tok::Op('@') {
                self.next();
                match self.next() {
                    Tok::Numb(n) => {
                        let d = n.parse::<u64>().unwrap_or(u64::MAX);
                        self.ast.set_distance(t, d);
                    }
                    _ => {
                        self.at -= 1;
                        return Err(self.unexpected(&["FTS_NUMB"]));
                    }
                }
            }
            return Ok(t);
        }
        let t = self.term()?;
        if self.peek() == &Tok::Op('*') {
            self.next();
            self.ast.set_wildcard(t);
        }
        Ok(t)
    }

    /// expr_lst, up to its end (`$end` at the top, `)` inside parentheses).
    fn expr_lst(&mut self, nested: bool) -> Result<Option<usize>, SyntaxError> {
        let mut list: Option<usize> = None;
        loop {
            match self.peek().clone() {
                Tok::Term(_) | Tok::Numb(_) | Tok::Text(_) | Tok::Op('*') => {
                    let e = self.operand()?;
                    match list {
                        None => list = Some(self.ast.list(e)),
                        Some(l) => self.ast.push(l, e),
                    }
                }
                Tok::Op('(') => {
                    self.next();
                    let sub = self
                        .sub_expr_body()?
                        .map(|inner| self.ast.add(Kind::SubExp(vec![inner]), Oper::None));
                    self.append_sub(&mut list, sub);
                }
                Tok::Op(p) if PREFIXES.contains(p) => {
                    self.next();
                    let oper = self.ast.add(Kind::Oper, oper_of(p));
                    match self.peek() {
                        Tok::Op('(') => {
                            self.next();
                            let inner = self.sub_expr_body()?;
                            let l = self.ast.list(Some(oper));
                            if let Some(inner) = inner {
                                let s = self.ast.add(Kind::SubExp(vec![inner]), Oper::None);
                                self.ast.push(l, Some(s));
                            }
                            self.append_sub(&mut list, Some(l));
                        }
                        Tok::Term(_) | Tok::Numb(_) | Tok::Text(_) | Tok::Op('*') => {
                            let e = self.operand()?;
                            let l = self.ast.list(Some(oper));
                            self.ast.push(l, e);
                            match list {
                                None => list = Some(self.ast.list(Some(l))),
                                Some(outer) => self.ast.push(outer, Some(l)),
                            }
                        }
                        _ => return Err(self.unexpected(&[])),
                    }
                }
                Tok::Op(')') if nested => return Ok(list),
                Tok::End if !nested => return Ok(list),
                _ if nested => return Err(self.unexpected(&[])),
                _ => return Err(self.unexpected(&["$end"])),
            }
        }
    }

    /// After '(': the inner list and its ')'; the inner list (None if empty).
    fn sub_expr_body(&mut self) -> Result<Option<usize>, SyntaxError> {
        let inner = self.expr_lst(true)?;
        self.next(); // ')'
        Ok(inner)
    }

    /// `expr_lst sub_expr`: the list so far is wrapped in a new list, then the
    /// sub-expression appended.
    fn append_sub(&mut self, list: &mut Option<usize>, sub: Option<usize>) {
        let wrapped = self.ast.list(*list);
        self.ast.push(wrapped, sub);
        *list = Some(wrapped);
    }
}

fn oper_of(c: char) -> Oper {
    match c {
        '-' => Oper::Ignore,
        '+' => Oper::Exist,
        '~' => Oper::Negate,
        '<' => Oper::DecrRating,
        _ => Oper::IncrRating,
    }
}

/// Parses a query (already folded as the index folds words).
pub fn parse(
    query: &str,
    boolean: bool,
    settings: &Settings,
    fold_case: bool,
) -> Result<Ast, SyntaxError> {
    let mut p = Parser {
        toks: lex(query, boolean),
        at: 0,
        ast: Ast::default(),
        settings,
        fold_case,
    };
    let root = p.expr_lst(false)?;
    p.ast.root = root;
    Ok(p.ast)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(q: &str) -> String {
        match parse(q, true, &Settings::legacy(), true) {
            Err(SyntaxError(m)) => m,
            Ok(_) => "ok".into(),
        }
    }

    #[test]
    fn syntax_errors_are_innodbs() {
        assert_eq!(err("+"), "syntax error, unexpected $end");
        assert_eq!(err("a @"), "syntax error, unexpected '@', expecting $end");
        assert_eq!(
            err("\"a b\" @"),
            "syntax error, unexpected $end, expecting FTS_NUMB"
        );
        assert_eq!(err("+-a"), "syntax error, unexpected '-'");
        assert_eq!(
            err("tutorial)"),
            "syntax error, unexpected ')', expecting $end"
        );
        assert_eq!(err("(tutorial"), "syntax error, unexpected $end");
        assert_eq!(
            err("tut**"),
            "syntax error, unexpected $end, expecting FTS_TERM or FTS_NUMB or '*'"
        );
        for ok in [
            "()",
            "**tut",
            "\"unclosed",
            "mysql%",
            "a (b) +(c -d) \"x y\" @3",
            "",
        ] {
            assert_eq!(err(ok), "ok", "{ok}");
        }
    }

    #[test]
    fn tree_shape() {
        let ast = parse("+abc,bcd c*", true, &Settings::legacy(), true)
            .ok()
            .unwrap_or_default();
        let root = ast.root.expect("root");
        let Kind::List(top) = &ast.nodes[root].kind else {
            panic!("top is a list")
        };
        assert_eq!(top.len(), 2);
        let Kind::List(first) = &ast.nodes[top[0]].kind else {
            panic!("prefix expr is a list")
        };
        assert_eq!(ast.nodes[first[0]].oper, Oper::Exist);
        assert!(matches!(ast.nodes[first[1]].kind, Kind::List(ref v) if v.len() == 2));
        assert_eq!(
            ast.nodes[top[1]].kind,
            Kind::Term {
                word: "c".into(),
                wildcard: true
            }
        );
    }
}
