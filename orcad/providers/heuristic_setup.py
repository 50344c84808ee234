"""The offline extractor's rules for plainly stated project setup and team conventions. Pure.

Without a request to remember, a statement is kept only when its subject names a part of a
project's setup (CI, the database, staging, the main branch, the package manager, the linter,
a runtime, ...) and its verb states something lasting about it ("is Postgres 15", "runs on
Buildkite", "lives at staging.example.com", "is written in Go", "is called trunk"); or when it
is a convention the team keeps ("tests must pass before merging", "use yarn, not npm", "lint
with ruff", "we target Python 3.11"). What "is" names must look like a name (a capitalised word,
a version, a path, a host, a known tool), so "the database is locked" and "the CI is red" stay
out; a statement that reports trouble ("... and fails", "on my machine") or a state of the work
("still", "again", "now" after a location) is not kept either.
"""

from __future__ import annotations

import re
from typing import Literal

from orcad.lazy_patterns import lazy_compile

SetupCategory = Literal["project", "feedback"]

_FLAGS = re.IGNORECASE

# what a project's setup is made of: the head noun of a statement's subject
_SETUP_NOUN = (
    r"(?:ci|ci/cd|cd|pipelines?|build system|builds|database|databases|db|dbs|datastore"
    r"|staging|production|prod|environments?|env"
    r"|(?:main|default|release|base|integration|production|stable)\s+branch|trunk"
    r"|package\s+manager|linters?|formatters?|formatting|linting|type\s*checker|test\s+runner"
    r"|test\s+framework|tests|test\s+suite|monorepo|repo|repository|codebase"
    r"|apis?|frontend|front-end|backend|back-end|server|services?|app|apps|cli|website|site"
    r"|cache|queue|message\s+queue|broker|event\s+bus|orm|docs|documentation|containers"
    r"|images|infra|infrastructure|cloud|cluster|logs|logging|errors|error\s+tracking|metrics"
    r"|monitoring|alerting|auth|authentication|gateway|migrations|releases|versioning"
    r"|changelog|lockfile|dependencies|deps|feature\s+flags|config|configuration|code"
    r"|definitions|schemas?|runtime|language|port|version|python|node(?:\.js)?|go|golang|java"
    r"|ruby|rust|typescript|php|kotlin|swift|dotnet|\.net|storage|search|cdn|dns|hosting"
    r"|timestamps|times|dates|money|prices|amounts|ids|uuids|commit\s+messages|branch\s+names"
    r"|tags|code\s+review|reviews|editor|ide|shell|os)"
)
# words that make a subject about this moment or someone's own copy, not the project
_NOT_QUALIFIER = (
    r"(?!(?:my|your|his|her|their|this|that|these|those|a|an|new|old|local|current|temporary"
    r"|broken|it|its|the|our|any|some|which|what|i|we|you|maybe|perhaps|probably|possibly)\b)"
)
_SUBJECT = rf"(?:(?:the|our)\s+)?(?:{_NOT_QUALIFIER}[\w.+#/-]+\s+){{0,2}}?{_SETUP_NOUN}(?:'s)?"

# lowercase names developers type for tools, runtimes and branches
_KNOWN_NAME = (
    r"(?:postgres(?:ql)?|mysql|mariadb|sqlite3?|redis|mongo(?:db)?|kafka|rabbitmq|nats|sqs"
    r"|elasticsearch|opensearch|clickhouse|dynamodb|cassandra|memcached|pnpm|npm|yarn|bun|deno"
    r"|pip|uv|poetry|pipenv|conda|pdm|hatch|cargo|maven|gradle|bazel|make|cmake|ninja|nx|turbo"
    r"|lerna|ruff|black|isort|flake8|pylint|mypy|pyright|eslint|prettier|biome|rubocop|gofmt"
    r"|golangci-lint|clippy|rustfmt|jest|vitest|mocha|pytest|unittest|rspec|junit|playwright"
    r"|cypress|selenium|helm|terraform|pulumi|ansible|kubernetes|k8s|k3s|docker|podman|nomad"
    r"|jenkins|buildkite|circleci|travis|drone|github|gitlab|bitbucket|argocd|argo|flux|heroku"
    r"|vercel|netlify|fly|aws|gcp|azure|python|node|go|golang|java|ruby|rust|typescript"
    r"|javascript|php|kotlin|swift|elixir|scala|main|master|trunk|develop|dev|semver|calver"
    r"|utc|react|vue|svelte|angular|django|flask|fastapi|rails|express|nextjs|vite|webpack"
    r"|esbuild|rollup|sphinx|mkdocs|docusaurus|tabs|spaces|grpc|graphql|rest|json|protobuf"
    r"|sentry|datadog|grafana|prometheus|vault|nginx|caddy|traefik|envoy|linux|ubuntu|debian"
    r"|alpine|macos|windows|bash|zsh|fish|vim|neovim|emacs|vscode)"
)
# what a name is not, whatever its case
_NOT_A_NAME = lazy_compile(
    r"^(?:the|a|an|this|that|these|those|it|its|my|your|our|their|not|also|now|still|very|too"
    r"|so|really|just|always|never|currently|ok|okay|fine|good|done|ready|green|red|broken|down"
    r"|up|live|online|offline|wip|todo|n/a|none|null|nil|empty|true|false|here|there|what"
    r"|which|where|when|why|how)$",
    _FLAGS,
)
# "95% full", "3 commits ahead", "2 GB": an amount of something now, not a version or a port
_MEASURE = lazy_compile(
    r"^\d[\d.,]*\s*(?:%|(?!(?:and|or|with|in|on|for|by|to|from|at|via|only|and\s+up"
    r"|or\s+later|or\s+newer|or\s+above)\b)[a-z]+\b)",
    _FLAGS,
)
_NAME_TOKEN = lazy_compile(
    r"^(?:`[^`]+`|[\"'][^\"']+[\"']|https?://\S+|(?-i:[A-Z])[\w.+#/-]*|[\w.+#-]*\d[\w.+#/-]*|[\w.-]*/[\w./-]*"
    r"|[\w-]+(?:\.[\w-]+)+|[a-z]+_[a-z_]+|(?-i:[a-z]+[A-Z]\w*)"
    rf"|{_KNOWN_NAME}(?![\w-]))",
    _FLAGS,
)
# a statement that reports trouble or a state of the work, not how things are set up
_TROUBLE = lazy_compile(
    r"\b(?:fails?|failed|failing|broken|breaks|broke|crash\w*|hangs?|hung|stuck|slow|flaky"
    r"|timed?\s?out|times\s+out|timing\s+out|doesn't|does\s+not|don't|isn't|aren't|wasn't|weren't|can't"
    r"|cannot|won't|not\s+working|no\s+longer|missing|wrong|bug|bugs|error|still|again|yet"
    r"|anymore|halfway|locally|on\s+my\s+(?:machine|laptop|box)|for\s+me|when\s+i|if\s+i"
    r"|unless|until|right\s+after|this\s+(?:branch|pr|file|function|test|change|commit)"
    r"|your\s+change|my\s+change)\b",
    _FLAGS,
)
_DEICTIC = lazy_compile(
    r"\b(?:here|there|now|this\s+time|for\s+now|too|as\s+well|first|instead|once\s+more"
    r"|for\s+(?:it|them))\W*$"
    r"|\b(?:for|in|on|to|with|from)\s+(?:this|that|these|those)\b",
    _FLAGS,
)
_DURABLE_ADJECTIVE = (
    r"(?:protected|read-only|immutable|deprecated|mandatory|required|append-only|self-hosted"
    r"|private|public|open[\s-]source|stateless|single-tenant|multi-tenant|managed|versioned)"
)

# "The database is Postgres 15.", "IDs are UUIDv7.", "Our CI is on GitHub Actions."
_SUBJECT_IS = lazy_compile(
    rf"^{_SUBJECT}\s+(?:is|are)\s+(?:(?P<prep>on|at|in|under|hosted\s+on|behind)\s+)?"
    r"(?P<rest>.+)$",
    _FLAGS,
)
# "The main branch is protected."
_SUBJECT_IS_PROPERTY = lazy_compile(
    rf"^{_SUBJECT}\s+(?:is|are)\s+(?:always\s+)?{_DURABLE_ADJECTIVE}\b(?P<rest>.*)$", _FLAGS
)
# "Our main branch is called trunk."
_SUBJECT_CALLED = lazy_compile(
    rf"^{_SUBJECT}\s+(?:is|are)\s+(?:called|named)\s+(?P<name>\S+(?:\s+\S+)?)\s*$", _FLAGS
)
# "The CI runs on Buildkite.", "The frontend uses React 18.", "We target Node 18."
_SUBJECT_VERB = lazy_compile(
    rf"^{_SUBJECT}\s+(?:runs?\s+(?:on|in|with|under|at|inside)|uses?|targets?|lives?\s+(?:at|in|on|under)"
    r"|sits?\s+(?:at|in|on|under)|follows?|goe?s?\s+(?:to|through|via)|comes?\s+from|talks?\s+to"
    r"|connects?\s+to|depends?\s+on|relies\s+on|rely\s+on|points?\s+to|supports?|speaks?"
    r"|requires?|deploys?\s+(?:to|with|via|through|from))\s+(?P<rest>.+)$",
    _FLAGS,
)
# "The API is written in Go.", "Releases are tagged with semver.", "Auth is handled by Auth0."
_SUBJECT_PASSIVE = lazy_compile(
    rf"^{_SUBJECT}\s+(?:is|are)\s+(?:always\s+|all\s+)?"
    r"(?:written|built|managed|hosted|deployed|tagged|stored|pinned|pushed|reported|handled"
    r"|updated|generated|cut|versioned|formatted|linted|checked|tested|run|kept|done|served"
    r"|configured|defined|declared|provisioned|published|released|shipped|sent|routed|backed"
    r"|powered|driven|installed|packaged|bundled|compiled|required|enforced|owned|maintained"
    r"|cached|proxied|mirrored|documented|named|licensed|encoded|split|organi[sz]ed|laid\s+out)"
    r"\s+(?:in|with|on|by|as|to|from|at|through|via|under|using|for|into)\s+(?P<rest>.+)$",
    _FLAGS,
)
# "fyi the staging db was moved to db-staging-3": where a part of the setup went
_SUBJECT_MOVED = lazy_compile(
    rf"^{_SUBJECT}\s+(?:was|were|has\s+been|have\s+been|got)\s+(?:moved|renamed|migrated"
    r"|upgraded|changed|switched|pinned)\s+(?:to|over\s+to)\s+(?P<rest>.+)$",
    _FLAGS,
)
# "Shared code lives in packages/common.": any subject, when the place is a path or a host
_LIVES_AT_PATH = lazy_compile(
    r"^(?:(?:the|our|all)\s+)?(?:(?!(?:my|your|this|that|these|those|it|a|an|maybe|perhaps"
    r"|probably|possibly|i|we|you|he|she|they|patch|diff|fix|change|changes|output|dump|screenshot"
    r"|error|bug|issue|trace|traceback|crash|log)\b)[\w.+#-]+\s+)"
    r"{1,3}?(?:lives?|sits?|(?:is|are)\s+(?:kept|located|defined|stored))\s+(?:in|at|under)\s+"
    r"(?!/tmp/|`/tmp/)(?P<place>`[^`]+`|\S*[/.]\S*)(?P<rest>.*)$",
    _FLAGS,
)
# "This is a monorepo managed with Nx.", "The repo is a monorepo: apps/ and packages/."
_A_MONOREPO = lazy_compile(
    r"^(?:this|it|(?:the|this|our)\s+(?:repo|repository|project|codebase))\s+is\s+an?\s+"
    r"(?:[\w-]+\s+){0,2}?(?:monorepo|polyrepo|monolith|workspace)\b.*$",
    _FLAGS,
)
# "Tests must pass before merging.", "Every PR needs one approval."
_CONVENTION_NOUN = (
    r"(?:tests?|unit\s+tests?|integration\s+tests?|prs?|pull\s+requests?|commits?"
    r"|commit\s+messages?|branches|branch\s+names?|migrations?|endpoints?|functions?"
    r"|public\s+functions?|methods?|classes|modules?|files|changes?|releases?|merges?|deploys?"
    r"|deployments?|reviews?|code|imports|queries|handlers|features?|fixes|bug\s+fixes|hotfixes"
    r"|columns|tables|dependencies|docs|docstrings|names|variables|apis|routes|components)"
)
_MUST = lazy_compile(
    r"^(?:(?P<quantifier>all|every|each|any|new|our)\s+)?(?:(?:new|public|private|merged"
    r"|database|schema|python|go|api|ui|frontend|backend|source)\s+)?(?P<noun>"
    rf"{_CONVENTION_NOUN})\s+(?:must(?:\s+not)?|should(?:\s+not)?|need\s+to|needs\s+to"
    r"|have\s+to|has\s+to|needs?|require|requires|are\s+required\s+to|is\s+required\s+to"
    r"|may\s+only|can\s+only|always|never|follow|follows|start\s+with|starts\s+with"
    r"|begin\s+with|begins\s+with|go\s+through|get)\s+(?P<rest>.+)$",
    _FLAGS,
)
_WORK_ASKED = lazy_compile(
    r"^(?:to\s+)?(?:be\s+)?(?:fix(?:ed|ing)?|updat(?:ed|ing)|chang(?:ed|ing)|rewrit(?:ten|ing)"
    r"|remov(?:ed|ing)|delet(?:ed|ing)|revert(?:ed|ing)|looked\s+at|checked\s+(?:again|out)"
    r"|a\s+(?:fix|rewrite|look|cleanup|refactor)|\w+ing|more|less|better|worse|\w{2,}er)\b",
    _FLAGS,
)
# "Use yarn, not npm.", "use uv instead of pip", "Prefer composition over inheritance."
_NOT_THE_ONE = (
    r"(?!(?:a|an|this|that|these|those|it|one|them|the\s+(?:other|second|first|last|same|new"
    r"|old|previous|existing|next|former|latter))\b)"
)
# ... and what it replaces is a kind of thing, not one in the code at hand ("use Promise.all
# instead of the loop", "use map instead of this for loop")
_NOT_THE_CODE_AT_HAND = r"(?!(?:the|this|that|these|those|my|your|its)\b)"
_USE_NOT = lazy_compile(
    rf"^(?:please\s+)?(?:always\s+)?use\s+{_NOT_THE_ONE}(?P<one>[^,;]+?)"
    r"(?:\s*,\s*(?:and\s+)?not|\s+instead\s+of|\s+rather\s+than|\s+over)\s+"
    rf"{_NOT_THE_CODE_AT_HAND}(?P<other>.+)$",
    _FLAGS,
)
_PREFER_OVER = lazy_compile(
    rf"^(?:please\s+)?prefer\s+{_NOT_THE_ONE}(?P<one>.+?)\s+(?:over|to|rather\s+than"
    rf"|instead\s+of)\s+{_NOT_THE_CODE_AT_HAND}(?P<other>.+)$",
    _FLAGS,
)
# "Use snake_case for database columns.", "Use camelCase in the JSON API."
_USE_FOR = lazy_compile(
    rf"^(?:please\s+)?(?:always\s+)?use\s+{_NOT_THE_ONE}(?P<one>\S+(?:\s+\S+)?)\s+(?:for|in)"
    r"\s+(?:all\s+|every\s+|each\s+|the\s+)?(?P<what>(?:[\w-]+\s+){0,2}[\w-]+)\s*$",
    _FLAGS,
)
_DONT_USE = lazy_compile(
    rf"^(?:please\s+)?(?:don't|do\s+not|avoid)\s+(?:use\s+|using\s+)?{_NOT_THE_ONE}"
    r"(?P<what>[\w.+#-]+(?:\s+[\w.+#()-]+){0,3})(?P<rest>(?:\s*[;,]\s*.+)?|\s+(?:in|for)\s+.+)$",
    _FLAGS,
)
_KEEP = lazy_compile(
    r"^(?:please\s+)?keep\s+(?:your\s+)?(?:answers|responses|replies|explanations|summaries"
    r"|status\s+updates|commit\s+messages|commits|prs|pull\s+requests|functions|files|diffs"
    r"|changes)\s+(?:short|concise|brief|small|focused|under|below|to\s+one|to\s+a|terse)\b.*$",
    _FLAGS,
)
# "Lint with ruff; format with black.", "Test with pytest -n auto."
_DO_WITH = lazy_compile(
    r"^(?:please\s+)?(?:always\s+)?(?:lint|format|test|type-?check|build|bundle|package|deploy"
    r"|release|publish)\s+(?:everything\s+|the\s+code\s+)?(?:with|using"
    r"|via|through)\s+(?P<rest>.+)$",
    _FLAGS,
)
# "We target Python 3.11.", "We lint with eslint.", "We follow trunk-based development."
_WE_SETUP = lazy_compile(
    r"^we\s+(?:(?P<target>target|support|require)\s+(?P<name>.+)"
    r"|(?:lint|format|test|type-?check|bundle|package|build)\s+(?:(?:\w+\s+){0,2}?)"
    r"(?:with|using|via|through|on)\s+(?P<tool>.+)"
    r"|follow\s+(?!up\b)(?P<follow>.+)"
    r"|(?P<ship>deploy|release|ship|publish|host|build)\s+(?:with|via|through|on|to|from|using)"
    r"\s+(?P<how>.+)"
    r"|(?:squash(?:[\s-]merge)?|rebase|fast-forward)\b(?P<merge>.*)"
    r"|(?:write|store|keep|tag|version|pin|document|track|host)\s+.+?\s+(?:in|as|with|under|on)"
    r"\s+(?P<where>.+))$",
    _FLAGS,
)
_WE_ARE_ON = lazy_compile(r"^we(?:'re|\s+are)\s+on\s+(?P<name>.+)$", _FLAGS)
_VERSIONED = lazy_compile(r"^(?-i:[A-Z])[\w.+#-]*\s+v?\d[\w.]*", _FLAGS)


def _first_word(text: str) -> str:
    text = text.strip()
    if text[:1] == "`":
        end = text.find("`", 1)
        return text[: end + 1] if end > 0 else text
    return text.split(maxsplit=1)[0].rstrip(".,;:!") if text else ""


def name_like(text: str) -> bool:
    """Whether `text` starts with what reads as a name: a capitalised word, a version, a path,
    a host, an identifier or a known tool; not an adjective, a pronoun or a measure."""
    word = _first_word(text)
    if re.match(r"^port\s+\d+\b", text.strip(), _FLAGS):
        return True
    if len(word) < 2 or _NOT_A_NAME.match(word) or _MEASURE.match(text.strip()):
        return False
    return bool(_NAME_TOKEN.match(word)) or word.isupper()


def _mentions_a_name(text: str) -> bool:
    return any(name_like(part) for part in re.split(r"\s+", text) if part)


def _lasting(rest: str) -> bool:
    return not _TROUBLE.search(rest)


def _stated(sentence: str) -> str:
    return re.sub(r"^our\b", "the", sentence, flags=_FLAGS)


def _setup_statement(sentence: str) -> str | None:
    kept = False
    if matched := _SUBJECT_CALLED.match(sentence):
        name = matched.group("name")
        kept = name_like(name) or bool(re.fullmatch(r"[\w./-]+", name))
    elif matched := _SUBJECT_IS_PROPERTY.match(sentence):
        kept = _lasting(matched.group("rest"))
    if not kept and (matched := _SUBJECT_PASSIVE.match(sentence)):
        first = _first_word(matched.group("rest"))
        kept = _lasting(matched.group("rest")) and (
            first.lower() == "the" or not _NOT_A_NAME.match(first)
        )
    if not kept and (matched := _SUBJECT_MOVED.match(sentence)):
        kept = name_like(matched.group("rest")) and _lasting(matched.group("rest"))
    if not kept and (matched := _SUBJECT_VERB.match(sentence)):
        rest = matched.group("rest")
        through_a_path = bool(re.match(r"^the\s", rest, _FLAGS)) and "/" in rest
        kept = _lasting(rest) and (name_like(rest) or through_a_path)
    if not kept and (matched := _SUBJECT_IS.match(sentence)):
        kept = _lasting(matched.group("rest")) and name_like(matched.group("rest"))
    if not kept and (matched := _LIVES_AT_PATH.match(sentence)):
        kept = _lasting(matched.group("rest"))
    if kept:
        return _stated(sentence)
    if _A_MONOREPO.match(sentence) and _lasting(sentence):
        return re.sub(r"^(?:this|it)\s+is\b", "The project is", sentence, flags=_FLAGS)
    return None


def _convention(sentence: str) -> tuple[SetupCategory, str] | None:
    if (matched := _MUST.match(sentence)) and not _WORK_ASKED.match(matched.group("rest")):
        noun = matched.group("noun").lower()
        quantified = noun.endswith("s") or noun == "code" or matched.group("quantifier")
        if quantified and _lasting(matched.group("rest")):
            return "project", _stated(re.sub(r"\s+though$", "", sentence, flags=_FLAGS))
    if matched := _WE_SETUP.match(sentence):
        name, tool, where = matched.group("name"), matched.group("tool"), matched.group("where")
        if (
            (name is not None and not name_like(name))
            or (tool is not None and not name_like(tool))
            or (where is not None and not _mentions_a_name(where))
            or not _lasting(sentence)
        ):
            return None
        if (how := matched.group("how")) is not None and not name_like(how):
            return None
        if name is not None:
            return "project", f"The project {matched.group('target').lower()}s {name}"
        if how is not None:  # as the older "we deploy ... through" rule words it
            verb = matched.group("ship").lower()
            verbs = f"{verb}es" if verb == "publish" else f"{verb}s"
            return "project", f"The team {verbs} {sentence.split(maxsplit=2)[2]}"
        return "project", f"In this project, {sentence[0].lower()}{sentence[1:]}"
    matched = _WE_ARE_ON.match(sentence)
    if matched and _VERSIONED.match(matched.group("name")) and _lasting(matched.group("name")):
        return "project", f"The project is on {matched.group('name')}"
    return None


def _instruction(sentence: str) -> str | None:
    if _USE_NOT.match(sentence) or _PREFER_OVER.match(sentence):
        return sentence if _lasting(sentence) else None
    if matched := _USE_FOR.match(sentence):
        what = matched.group("what")
        scope = what.lower().endswith("s") or re.search(rf"\b{_SETUP_NOUN}$", what, _FLAGS)
        kept = name_like(matched.group("one")) and scope and _lasting(sentence)
        return sentence if kept else None
    if matched := _DONT_USE.match(sentence):
        what = matched.group("what")
        kinds = what.split()[-1].lower().endswith("s") or name_like(what)
        return sentence if kinds and _lasting(f"{what}{matched.group('rest')}") else None
    if _KEEP.match(sentence):
        return sentence
    if (matched := _DO_WITH.match(sentence)) and name_like(matched.group("rest")):
        # a command-line flag makes it one command to run, not how the team works
        flag = re.search(r"(?:^|\s)--?[a-z]", matched.group("rest"), _FLAGS)
        return sentence if not flag and _lasting(sentence) else None
    return None


def setup_fact(sentence: str) -> tuple[SetupCategory, str] | None:
    """The category and text of a plainly stated setup fact or convention, or None; nothing
    for a sentence about this piece of work only ("for this test", "here")."""
    sentence = re.sub(r"[\s.!;:,]+$", "", sentence)
    if _DEICTIC.search(sentence):
        return None
    if statement := _setup_statement(sentence):
        return "project", statement
    if convention := _convention(sentence):
        return convention
    if instruction := _instruction(sentence):
        return "feedback", instruction
    return None
