"""The offline extractor: a few deterministic rules over the user's own words.

It reads the redacted source the capture layer builds (blocks `user: …` / `assistant: …`
separated by blank lines) and answers in the strict extractor format, or exactly `NOTHING`.

What it finds, sentence by sentence, in user messages only:

- explicit requests to remember: "remember that …", "keep in mind that …", "for future
  reference, …"; the rest of the sentence is classified by the rules below, and is a project fact
  when none of them applies ("remember that this repository deploys with `make release`" gives
  the project fact "This repository deploys with `make release`.");
- "remember to …", "from now on, …", "always …", "never …", "don't ever …", "you should always
  …": feedback about how the assistant should work;
- first-person preferences: "I prefer / like / love / hate / dislike / always / never …", "I'd
  rather …", "my preference is …": user facts rewritten in the third person ("The user prefers
  concise status updates.");
- project conventions and decisions: "we use …", "we decided / agreed / chose …", "our
  convention / policy / rule is …", "(our staging) deploys / releases / migrations go through
  …", "we deploy / release / ship … through / via / to …", "this repository / project uses /
  deploys / requires …";
- plainly stated project setup (`heuristic_setup.py`): a subject that names a part of it (CI,
  the database, staging/production, the main or default branch, the package manager, the linter
  or formatter, the test runner, a runtime or its version, the API, the frontend, the cache,
  migrations, releases, ...) with a lasting verb and a name ("the database is Postgres 15", "CI
  runs on Buildkite", "staging lives at staging.example.com", "the API is written in Go", "our
  main branch is called trunk", "the staging db was moved to db-staging-3"); any subject that
  "lives in" a path or a host ("shared code lives in packages/common"); "this is a monorepo";
- conventions: "tests must pass before merging", "every PR needs one approval", "we target
  Python 3.11", "we're on Node 20", "we lint / format / test with …", "we follow …", "we deploy
  with …"; and instructions with a contrast or a scope: "use yarn, not npm", "use uv instead of
  pip", "prefer composition over inheritance", "use snake_case for database columns", "don't use
  default exports", "keep PRs under 400 lines", "lint with ruff; format with black" (what a
  request to remember asks to keep is kept in its own words, not rewritten by these rules);
- an explicit request inside a longer sentence ("fix it and remember that we use pnpm"), a fact
  said in passing after one ("add a test, btw CI runs on Buildkite"), and prose after a code
  fence that never closes (a paste cut short);
- references: a sentence with an http(s) URL (not a loopback one) or a documentation path that
  names what it points to (docs, runbook, dashboard, wiki, spec, design doc, …).

What it cannot do, honestly:

- it does not understand meaning: a durable fact phrased in any other way is missed, and an odd
  sentence that happens to match a rule may be kept;
- it never reads assistant messages (what the assistant says is not confirmed by the user);
- it drops questions, sentences inside code fences or indented blocks, quoted and shell lines,
  sentences that mention redacted values, credential words or personal data, and sentences
  with transient markers ("today", "right now", "for now", …), rather than trying to rescue
  part of them;
- a setup statement needs a name after "is" (a capitalised word, a version, a path, a host or
  one of a list of known tools), so "the database is locked" and "the CI is red" are dropped, and
  so is "the monorepo uses turborepo" (a tool it does not know, in lowercase); a statement that
  reports trouble ("… and fails", "still", "on my machine") or points at this piece of work
  ("for this test", "here") is dropped too;
- its third-person rewrite is a small set of string rules, so grammar can be imperfect.

Everything else (questions, progress reports, code, tool output) yields `NOTHING`, unless the
provider has a judge: the fact classifier (orcad/providers/fact_classifier.py) then reads each
sentence no rule keeps (`judged_text` says which it never reads) and keeps the ones it judges a
durable fact, in the user's words. The rules are pure: no trio, no I/O. `HeuristicProvider` is
the async wrapper the worker calls; with a judge it runs the extraction in a worker thread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from orcad import limits
from orcad.lazy_patterns import lazy_compile
from orcad.providers.heuristic_refusals import refused, refused_verbatim, taken_back
from orcad.providers.heuristic_setup import setup_fact

HEURISTIC_VERSION = "heuristic-v8"  # bump whenever a rule changes what is extracted
NOTHING = "NOTHING"

Category = Literal["user", "feedback", "project", "reference"]
_KINDS: dict[str, Category] = {
    "user": "user",
    "feedback": "feedback",
    "project": "project",
    "reference": "reference",
}

_FLAGS = re.IGNORECASE
_ROLE_LINE = lazy_compile(r"^(user|assistant):[ \t]?(.*)$", re.DOTALL)
_FENCE = lazy_compile(r"^\s*(```|~~~)")
_CODE_OR_OUTPUT_LINE = lazy_compile(r"^(?:    |\t|\s*(?:\$ |> |>>> |#!|Traceback \(most recent))")
_LIST_MARKER = lazy_compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
# A line after an unclosed fence is read only when it looks like words, not code.
_PROSE_LINE = lazy_compile(r"^\s*[A-Za-z][^{}();=<>\[\]|]{0,300}$")
# a sentence ends at ".", "!" or "?" before a space, but not at "e.g." or "i.e."
_SENTENCE_BREAK = lazy_compile(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s+", re.IGNORECASE)
_FILLER = lazy_compile(
    r"^(?:(?:please|pls|plz|also|and|oh|btw|by the way|fyi|ok|okay|so|just|one more thing|note"
    r"|heads up)"
    r"\b[,:]?\s+)+",
    _FLAGS,
)

_REMEMBER_TO = lazy_compile(
    r"^(?:please\s+)?(?:remember|don't forget|do not forget)\s+to\s+(?P<body>.+)$", _FLAGS
)
# what a request may say it is for before the fact: "Remember this for the project: ...",
# "remember for this repo that ...", "keep in mind the following: ..."
_FOR_THE_PROJECT = r"(?:for|about|in)\s+(?:the|this|our)\s+(?:project|repo|repository|codebase|app)"
_REMEMBER = lazy_compile(
    r"^(?:please\s+)?"
    r"(?:remember|don't forget|do not forget|keep in mind|for future reference|for the record)\b"
    rf"(?:\s+(?:this|these|the following)(?:\s+{_FOR_THE_PROJECT})?\s*[:,]"
    rf"|\s+{_FOR_THE_PROJECT}(?:\s*[:,]|(?=\s+that\b)))?"
    r"[,:]?\s*(?:that\s+)?(?P<body>.+)$",
    _FLAGS,
)
# "Remember this: we use pnpm. Also, the staging database is db-staging-2.": a sentence that
# goes on with a request to remember is part of it, when it states something ("Also fix the
# lint errors" asks for work)
_GOES_ON = lazy_compile(
    r"^(?:also|and|plus)\b[,:]?\s+"
    r"(?P<body>(?:the|our|we|this|these|those|all|every|each|its|my)\b.+)$",
    _FLAGS,
)
# "Fix the build and remember that we use pnpm": an explicit request inside a longer sentence.
_EMBEDDED_REMEMBER = lazy_compile(
    r"(?:[,;:]\s*|\s(?:and|but|also|please|so|then)\s+)(?:please\s+)?"
    r"(?P<trigger>(?:remember|keep in mind|don't forget|do not forget)\b.+)$",
    _FLAGS,
)
# "add a test for the parser, btw CI runs on Buildkite": a fact said in passing after a request
_EMBEDDED_ASIDE = lazy_compile(
    r"(?:[,;:]\s*|\s[-\u2013\u2014]+\s*|\s)(?:btw|by the way|fyi|for reference|heads up|note)\b"
    r"[,:]?\s+(?P<aside>.+)$",
    _FLAGS,
)
_FROM_NOW_ON = lazy_compile(
    r"^(?:from now on|going forward|in (?:the )?future|in general)\s*,?\s+(?P<body>.+)$", _FLAGS
)
_ALWAYS_NEVER = lazy_compile(r"^(?P<word>always|never)\s+(?P<body>.+)$", _FLAGS)
_DONT_EVER = lazy_compile(r"^(?:don't|do not)\s+ever\s+(?P<body>.+)$", _FLAGS)
_YOU_SHOULD = lazy_compile(
    r"^you\s+(?:should|must|need to)\s+(?P<word>always|never)\s+(?P<body>.+)$", _FLAGS
)

_PREFERENCE_VERB = lazy_compile(
    r"^i\s+(?P<adverb>(?:really|strongly|generally|usually|much|definitely)\s+)?"
    r"(?P<verb>prefer|like|love|hate|dislike|always|never)\s+(?P<body>.+)$",
    _FLAGS,
)
_PREFERENCE_DONT_LIKE = lazy_compile(
    r"^i\s+(?:don't|do not)\s+(?P<verb>like|want)\s+(?P<body>.+)$", _FLAGS
)
_PREFERENCE_WOULD = lazy_compile(
    r"^i(?:'d| would)\s+(?P<verb>prefer|rather)\s+(?P<body>.+)$", _FLAGS
)
_PREFERENCE_MY = lazy_compile(r"^my\s+preference\s+is\s+(?P<body>.+)$", _FLAGS)
# "I prefer this one" points at something in the current exchange, not a lasting preference.
_DEMONSTRATIVE_START = lazy_compile(
    r"^(?:this|that|it|these|those|the (?:first|second|third|last|former|latter)|option)\b", _FLAGS
)
_PAST_OR_MODAL = lazy_compile(
    r"^(?:\w+ed|got|did|was|were|had|went|made|saw|said|thought|knew|wrote|ran|took|could|would"
    r"|should|can|will|might|must)$",
    _FLAGS,
)

_WE_USE = lazy_compile(r"^we\s+(?:always\s+|now\s+)?use\s+(?P<body>.+)$", _FLAGS)
_WE_DECIDED = lazy_compile(
    r"^we(?:'ve| have)?\s+(?P<verb>decided|agreed|chose|settled on|standardi[sz]ed on)"
    r"\s+(?P<body>.+)$",
    _FLAGS,
)
_WE_ALWAYS = lazy_compile(r"^we\s+(?:always|never|only)\s+.+$", _FLAGS)
# a change the team made, which replaces what was kept before: "we switched from pnpm to
# yarn", "we've migrated the database from MySQL to Postgres 16"; with what it replaced, since
# "we switched to the other branch" is no fact
_WE_SWITCHED = lazy_compile(
    r"^we(?:'ve| have)?\s+(?:now\s+)?(?P<verb>switched|moved|migrated)\s+"
    r"(?P<body>(?:[\w-]+\s+){0,3}?(?:off|away from|from)\s+\S.{0,80}?\s+"
    r"(?:to|over to|onto)\s+\S.*)$",
    _FLAGS,
)
# a setting's new value: "the rate limit is now 200 a minute", "the API timeout was raised to
# 60 s"; only for a noun that names a setting, since "the build is now green" is no fact
_SETTING_CHANGED = lazy_compile(
    r"^(?:the|our)\s+(?:[\w-]+\s+){0,3}?(?:limit|timeout|version|port|default|quota|retention"
    r"|threshold|interval|minimum|maximum|ttl|budget|size|cap)\s+"
    r"(?:is\s+now|(?:was|has\s+been)\s+(?:raised|lowered|changed|bumped|increased|decreased"
    r"|reduced|set|moved)\s+to)\s+\S.*$",
    _FLAGS,
)
_OUR_CONVENTION = lazy_compile(
    r"^(?:our|the)\s+(?P<noun>convention|policy|rule|standard|workflow|process)\s+"
    r"(?:here\s+|in this (?:repo|repository|project|codebase)\s+)?is\s+(?P<body>.+)$",
    _FLAGS,
)
_GOES_THROUGH = lazy_compile(
    # "our staging deploys go through ArgoCD": up to two qualifiers before the noun
    r"^(?:(?:all|our|the)\s+)?(?:[\w-]+\s+){0,2}?(?:deploys|deployments|releases|migrations|merges|hotfixes|changes|commits"
    r"|pull requests|prs|builds)\s+(?:always\s+|must\s+|should\s+|have to\s+)?"
    r"(?:go|goes|are done|happen|run|are run|are made)\s+(?:through|via|with|from|on|in)\s+.+$",
    _FLAGS,
)
_WE_DEPLOY = lazy_compile(
    r"^we\s+(?:deploy|release|ship|publish|host|build)\b.+?"
    r"\s(?:through|via|with|on|to|from)\s+.+$",
    _FLAGS,
)
_THIS_REPOSITORY = lazy_compile(
    r"^(?:this|the|our)\s+(?:repo|repository|project|codebase|service)\s+"
    r"(?:uses|deploys|releases|requires|targets|runs on|is deployed|is released|builds with)\b.+$",
    _FLAGS,
)

_URL = lazy_compile(r"https?://[^\s)>\]`'\"]+", _FLAGS)
_LOOPBACK_URL = lazy_compile(
    r"https?://(?:localhost|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)\b", _FLAGS
)
_REFERENCE_NOUN = lazy_compile(
    r"\b(?:docs?|documentation|spec|specification|runbooks?|dashboards?|wiki|design doc|handbook"
    r"|guide|reference|api docs|changelog|readme|playbook|status page|adrs?)\b",
    _FLAGS,
)
_DOC_LOCATION = lazy_compile(
    r"\b(?:docs?|documentation|runbooks?|the spec|design docs?|adrs?|handbook)\s+(?:is|are|lives?"
    r"|can be found)\s+(?:in|at|under)\s+`?[\w./-]+/[\w./-]*`?",
    _FLAGS,
)

_PRONOUN_START = lazy_compile(
    r"^(?:i|i'm|i've|me|my|you|you're|your|he|she|they|it|it's)\b", _FLAGS
)


@dataclass(frozen=True, slots=True)
class HeuristicFact:
    category: Category
    fact: str


def split_messages(source: str) -> list[tuple[str, str]]:
    """(role, content) pairs; a block without a role prefix continues the previous message."""
    messages: list[tuple[str, str]] = []
    for block in re.split(r"\n[ \t]*\n", source):
        matched = _ROLE_LINE.match(block)
        if matched:
            messages.append((matched.group(1), matched.group(2)))
        elif messages:
            role, content = messages[-1]
            messages[-1] = (role, f"{content}\n\n{block}")
    return messages


def prose_sentences(content: str) -> list[str]:
    """The sentences of a message, leaving out fenced code, indented blocks, quotes and shells.

    A fence that never closes (a paste cut short, a forgotten closing fence) does not swallow
    the rest of the message: after it, lines that read as prose are still read.
    """
    lines = content.splitlines()
    fences = [i for i, line in enumerate(lines) if _FENCE.match(line)]
    unclosed = fences[-1] if len(fences) % 2 else None
    sentences: list[str] = []
    in_fence = False
    for index, line in enumerate(lines):
        if index == unclosed:
            continue
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or _CODE_OR_OUTPUT_LINE.match(line):
            continue
        if unclosed is not None and index > unclosed and not _PROSE_LINE.match(line):
            continue
        prose = _LIST_MARKER.sub("", line).strip()
        sentences.extend(part.strip() for part in _SENTENCE_BREAK.split(prose) if part.strip())
    return sentences


def third_person(verb: str) -> str:
    """'use' -> 'uses', 'push' -> 'pushes', 'carry' -> 'carries'."""
    lowered = verb.lower()
    irregular = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is"}
    if lowered in irregular:
        return irregular[lowered]
    if re.search(r"(?:s|sh|ch|x|z|o)$", lowered):
        return f"{verb}es"
    if re.search(r"[^aeiou]y$", lowered):
        return f"{verb[:-1]}ies"
    return f"{verb}s"


def as_sentence(text: str) -> str:
    """Whitespace collapsed, first letter capitalised, exactly one final full stop."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"[\s.!;:,]+$", "", text)
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    return f"{text}." if text else ""


def _user_preference(sentence: str) -> str | None:
    if matched := _PREFERENCE_VERB.match(sentence):
        verb, body = matched.group("verb").lower(), matched.group("body")
        adverb = (matched.group("adverb") or "").lower()
        if verb in ("always", "never"):
            first, _, rest = body.partition(" ")
            if _PAST_OR_MODAL.match(first) or not rest:
                return None
            return f"The user {adverb}{verb} {third_person(first)} {rest}"
        if _DEMONSTRATIVE_START.match(body):
            return None
        return f"The user {adverb}{third_person(verb)} {body}"
    if matched := _PREFERENCE_DONT_LIKE.match(sentence):
        if _DEMONSTRATIVE_START.match(matched.group("body")):
            return None
        return f"The user does not {matched.group('verb').lower()} {matched.group('body')}"
    if matched := _PREFERENCE_WOULD.match(sentence):
        body = matched.group("body")
        if _DEMONSTRATIVE_START.match(body):
            return None
        if matched.group("verb").lower() == "rather":
            return f"The user would rather {body}"
        return f"The user prefers {body}"
    if matched := _PREFERENCE_MY.match(sentence):
        return f"The user's preference is {matched.group('body')}"
    return None


def _feedback(sentence: str) -> str | None:
    if matched := _FROM_NOW_ON.match(sentence):
        body = matched.group("body")
        return None if _PRONOUN_START.match(body) and not body.lower().startswith("you") else body
    if sentence.lower().startswith("never mind"):
        return None
    if _ALWAYS_NEVER.match(sentence):
        return sentence
    if matched := _DONT_EVER.match(sentence):
        return f"Never {matched.group('body')}"
    if matched := _YOU_SHOULD.match(sentence):
        return f"{matched.group('word')} {matched.group('body')}"
    return None


def _project(sentence: str) -> str | None:
    if matched := _WE_USE.match(sentence):
        return f"The project uses {matched.group('body')}"
    if matched := _WE_DECIDED.match(sentence):
        return f"The team {matched.group('verb').lower()} {matched.group('body')}"
    if _WE_ALWAYS.match(sentence):
        return f"In this project, {sentence[0].lower()}{sentence[1:]}"
    if matched := _WE_SWITCHED.match(sentence):
        return f"The project {matched.group('verb').lower()} {matched.group('body')}"
    if _SETTING_CHANGED.match(sentence):
        return re.sub(r"^our\b", "the", sentence, flags=_FLAGS)
    if matched := _OUR_CONVENTION.match(sentence):
        return f"The project's {matched.group('noun').lower()} is {matched.group('body')}"
    if _WE_DEPLOY.match(sentence):
        verb, _, rest = sentence[3:].lstrip().partition(" ")
        return f"The team {third_person(verb)} {rest}"
    if _GOES_THROUGH.match(sentence) or _THIS_REPOSITORY.match(sentence):
        return re.sub(r"^our\b", "the", sentence, flags=_FLAGS)
    return None


def _reference(sentence: str) -> str | None:
    urls = _URL.findall(sentence)
    if urls and _REFERENCE_NOUN.search(sentence) and not any(_LOOPBACK_URL.match(u) for u in urls):
        return sentence
    if not urls and _DOC_LOCATION.search(sentence):
        return sentence
    return None


def _classify(sentence: str, *, setup: bool = True) -> tuple[Category, str] | None:
    """The first rule that recognises the sentence, with the fact text it gives; with `setup`
    false, not the rules for plainly stated setup (what a request to remember asks to keep is
    kept in its own words)."""
    if preference := _user_preference(sentence):
        return "user", preference
    if feedback := _feedback(sentence):
        return "feedback", feedback
    if project := _project(sentence):
        return "project", project
    if reference := _reference(sentence):
        return "reference", reference
    return setup_fact(sentence) if setup else None


def classify_sentence(sentence: str) -> HeuristicFact | None:
    """A fact for one user sentence, or None when no rule applies or a rejection rule does."""
    sentence = _FILLER.sub("", sentence.strip())
    if not sentence or sentence.endswith("?"):
        return None
    classified: tuple[Category, str] | None
    verbatim = False  # the user's words kept as written, whatever their shape
    if matched := _REMEMBER_TO.match(sentence):
        classified, verbatim = ("feedback", matched.group("body")), True
    elif matched := _REMEMBER.match(sentence):
        body = _FILLER.sub("", matched.group("body").strip())
        classified = _classify(body, setup=False)
        if classified is None and not _PRONOUN_START.match(body):
            classified, verbatim = ("project", body), True
    else:
        classified = _classify(sentence)
        embedded = _EMBEDDED_REMEMBER.search(sentence) if classified is None else None
        if embedded:
            return classify_sentence(embedded.group("trigger"))
        aside = _EMBEDDED_ASIDE.search(sentence) if classified is None else None
        if aside and not _EMBEDDED_ASIDE.search(aside.group("aside")):
            return classify_sentence(aside.group("aside"))
    if classified is None:
        return None
    category, text = classified
    fact = as_sentence(text)
    if len(fact.split()) < 3 or len(fact) > limits.EXTRACTOR_FACT_MAX_CHARS:
        return None
    if refused(fact) or (verbatim and refused_verbatim(fact)):
        return None
    return HeuristicFact(category=category, fact=fact)


# the fact classifier reads at most this many sentences of a source (the model takes a few
# milliseconds for each), within this share of the time the extraction is given
JUDGED_SENTENCES_MAX = 64
JUDGING_SHARE = 0.8
# what introduces a fact without being part of it: "context: the CDN is R2", "for context, ..."
# (not a hedge such as "iirc": a hedged claim is refused, `refused`)
_LEAD_IN = lazy_compile(
    r"^(?:(?:for\s+)?context|fwiw|for\s+the\s+record|reminder|tip|psa|important"
    r"|update)\b\s*[,:\-\u2013\u2014]\s*",
    _FLAGS,
)

# the fact classifier: the kind of durable fact a sentence states, or None (none, or it cannot
# judge now)
SentenceJudge = Callable[[str], str | None]


# a question without its question mark ("what's the default branch"), or a request for work
# ("add a --verbose flag to the CLI", "set up a CI job for the docs"): never a fact, however
# much its words sound like one. A verb counts only before what it acts on, since many are
# nouns too ("merge requests need two approvals", "build artifacts go to S3")
_ASKS = lazy_compile(
    r"^(?:(?:what|what's|whats|how|why|where|which|who|whose|is|are|does|did|can|could|would"
    r"|will|shall|should|explain|describe|summari[sz]e|compare)\b|do\s+(?:we|you|i|they)\b"
    r"|let'?s\b"
    r"|(?:add|create|implement|fix|set\s+up|make|build|move|rename|refactor|update|remove|delete"
    r"|change|convert|split|extract|generate|investigate|look|debug|try|help|show|tell"
    r"|bump|upgrade|install|revert|merge|rebase|push|open|close|migrate|rewrite|clean\s+up"
    r"|replace|wire|hook\s+up)\s+(?:a|an|the|this|that|these|those|it|them|my|me|us|some|up"
    r"|out|at|into|over|in|to|how|why|what)\b)",
    _FLAGS,
)


def judged_text(sentence: str) -> str | None:
    """What of a sentence the classifier reads: without fillers, lead-ins and a request to
    remember, the part after "btw" or "fyi" when a request comes first; None for a question, a
    request for work, a fragment, or what could not be kept anyway (too long, or refused)."""
    text = _FILLER.sub("", sentence.strip())
    if aside := _EMBEDDED_ASIDE.search(text):
        text = aside.group("aside")
    text = _FILLER.sub("", _LEAD_IN.sub("", text)).strip()
    if remembered := _REMEMBER.match(text):  # "remember that my laptop is a mac": no rule took it
        text = _FILLER.sub("", remembered.group("body")).strip()
    if not text or text.endswith("?") or len(text.split()) < 3 or _ASKS.match(text):
        return None
    fact = as_sentence(text)
    if len(fact) > limits.EXTRACTOR_FACT_MAX_CHARS or refused(fact) or refused_verbatim(fact):
        return None
    return text


def judged_fact(text: str, judge: SentenceJudge) -> HeuristicFact | None:
    """A fact for a sentence no rule keeps (as `judged_text` gives it), when the classifier
    judges it one."""
    kind = _KINDS.get(judge(text) or "")
    return None if kind is None else HeuristicFact(category=kind, fact=as_sentence(text))


def extract_facts(source: str, judge: SentenceJudge | None = None) -> list[HeuristicFact]:
    """At most EXTRACTOR_MAX_FACTS facts from the user messages of one source, first seen first;
    a fact its user takes back in the next sentence is not one. With `judge`, the first
    JUDGED_SENTENCES_MAX sentences no rule keeps are judged by the fact classifier."""
    facts: dict[str, HeuristicFact] = {}  # by case-folded text, in the order first seen
    judged = 0
    for role, content in split_messages(source):
        if role != "user":
            continue
        previous: str | None = None  # the key of the fact the sentence before gave
        asked = False  # whether the sentence before was a request to remember
        for sentence in prose_sentences(content):
            if len(facts) > limits.EXTRACTOR_MAX_FACTS:  # only the last can still be taken back
                return list(facts.values())[: limits.EXTRACTOR_MAX_FACTS]
            rest = taken_back(sentence)
            if rest is not None and previous is not None:
                del facts[previous]
            said = sentence if rest is None else rest
            fact = classify_sentence(said) if said else None
            if fact is None and asked and (going_on := _GOES_ON.match(said)):
                fact = classify_sentence(f"remember that {going_on.group('body')}")
            asked = fact is not None and bool(_REMEMBER.match(said) or _GOES_ON.match(said))
            text = judged_text(said) if fact is None and judge is not None and said else None
            if text is not None and judge is not None and judged < JUDGED_SENTENCES_MAX:
                judged += 1  # only what the classifier reads counts against its bound
                fact = judged_fact(text, judge)
            previous = None
            if fact is None or fact.fact.casefold() in facts:
                continue
            previous = fact.fact.casefold()
            facts[previous] = fact
    return list(facts.values())[: limits.EXTRACTOR_MAX_FACTS]


def render_output(facts: list[HeuristicFact]) -> str:
    """The strict extractor format: one JSON object per line, or NOTHING."""
    if not facts:
        return NOTHING
    return "\n".join(
        json.dumps({"category": f.category, "fact": f.fact}, ensure_ascii=False) for f in facts
    )


def heuristic_output(source: str, judge: SentenceJudge | None = None) -> str:
    return render_output(extract_facts(source, judge))


class FactJudge(Protocol):
    """The fact classifier as the provider holds it (orcad.providers.fact_classifier)."""

    @property
    def model(self) -> str:
        """What provenance records as the model ("" while the classifier cannot judge)."""
        ...

    def __call__(self, sentence: str) -> str | None: ...


class HeuristicProvider:
    """The offline default provider: deterministic, no model server. Rules alone are instant;
    with `judge`, the sentences no rule keeps are judged by the fact classifier, which runs
    the embedding model in a worker thread (a few milliseconds a sentence)."""

    name = "heuristic"
    prompt_version = HEURISTIC_VERSION

    def __init__(self, judge: FactJudge | None = None) -> None:
        self.judge = judge

    @property
    def model(self) -> str:
        return "" if self.judge is None else self.judge.model

    async def extract(self, source: str, *, deadline: float) -> str:
        if self.judge is None:
            return heuristic_output(source)
        import structlog  # noqa: PLC0415 (the rules above stay free of them)
        import trio  # noqa: PLC0415

        # the classifier has most of the time left; then the rules alone answer (in
        # microseconds), so that a slow classifier never costs the job the rules' facts
        now = trio.current_time()
        with trio.move_on_at(now + JUDGING_SHARE * max(0.0, deadline - now)):
            # a thread left behind still ends within its bound (JUDGED_SENTENCES_MAX)
            return await trio.to_thread.run_sync(
                heuristic_output, source, self.judge, abandon_on_cancel=True
            )
        structlog.get_logger("orcad.providers").warning(
            "fact_classifier.too_slow", seconds=round(trio.current_time() - now, 3)
        )
        return heuristic_output(source)
