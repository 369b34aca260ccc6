"""The rule-based extractor: offline, no LLM. It captures what matters most in a chat —
who the user is, stated preferences, standing instructions and explicit identifiers — and writes
a memory only when it is confident the statement is a self-contained fact about the speaker.

Precision over recall: a pattern match is kept only when

* the sentence is a plain statement by the speaker (no question, no hedge such as "maybe",
  "I think", "if I …", no reported speech such as "she said …", no negated frame such as
  "not that I …");
* the captured object is a noun phrase (or a gerund/infinitive activity) that reads on its own:
  not a clause about the listener ("that you …", "your …"), not an unresolved pronoun or
  demonstrative ("it", "that", "the first one"), not a fragment ending on a determiner,
  quantifier or preposition ("a few"), and with some content word;
* first-person words in the object are rewritten to the third person ("my family" → "their
  family"), so the memory reads correctly as a statement about the user.

Custom instructions are not interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..records import Record
from .base import Extractor
from .models import MAX_MEMORY_CHARS, ExtractionContext, ExtractionOutput, MemoryCandidate
from .rule_patterns import (
    ACTIVITY,
    ALLERGY,
    ATTR_HEADS,
    ATTR_SKIP,
    CLAUSE_BREAK,
    COGNITIVE_INFINITIVE,
    CONTACT,
    CUT,
    DANGLING,
    DIET,
    EMAIL,
    FAILING,
    FAMILY,
    FAN,
    FIRST_SUBJECT,
    FIRST_TO_THIRD,
    FROM,
    GUIDELINE,
    HEDGE_ANYWHERE,
    HEDGE_BEFORE,
    I_AM_A,
    IDENT,
    IDENT_IS,
    IDENT_NOUNS,
    INTERJECTIONS,
    JOB_CONTEXT,
    LIST_TAIL,
    LIVES,
    LIVES_WHERE,
    MEETING,
    MOVING_OBJECT,
    MY_ATTR,
    NAME_FOLLOW,
    NAME_PATTERNS,
    NOT_NAME_WORDS,
    NOT_NAMES,
    OCCUPATIONS,
    OTHERS,
    PET,
    PHONE,
    PREFERENCE,
    PROBLEM,
    REACTIVE,
    REPORTS,
    SECOND_PERSON,
    SENTENCE,
    STOP,
    TIME_DEICTIC,
    TRAILING,
    UNRESOLVED,
    VAGUE_START,
    VALUE_BAD_START,
    WH,
    WORD,
    WORKS,
    WORKS_AS,
)

Add = Callable[..., None]

def _sentences(text: str) -> list[str]:
    return [m.group(0).strip() for m in SENTENCE.finditer(text) if m.group(0).strip()]


def _sentence_with(text: str, start: int) -> str:
    for match in SENTENCE.finditer(text):
        if match.start() <= start < match.end():
            return match.group(0).strip()
    return text.strip()


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MEMORY_CHARS else text[: MAX_MEMORY_CHARS - 1] + "…"


def _words(text: str) -> list[str]:
    return [w.strip(".'’").lower() for w in WORD.findall(text) if w.strip(".'’")]


def _asserted(sentence: str, start: int) -> bool:
    """Whether the match at ``start`` is a plain statement: nothing in its clause before it
    makes it hypothetical, hedged, reported or negated, and the sentence has no hedge."""
    if HEDGE_ANYWHERE.search(sentence):
        return False
    before = sentence[:start]
    breaks = list(CLAUSE_BREAK.finditer(before))
    clause = before[breaks[-1].end():] if breaks else before
    if HEDGE_BEFORE.search(clause):
        return False
    # "if I …, I'd …": a conditional opening the sentence governs the whole of it
    return not re.match(r"\s*(?:if|unless|when|whenever|once|suppose|imagine|what if|even if)\b", before, re.I)


def _third_person_words(text: str) -> str:
    """First-person possessives and objects → third person ("my dad" → "their dad")."""
    return re.sub(
        r"\b(me|my|mine|myself|our|us|ours|ourselves)\b",
        lambda m: FIRST_TO_THIRD[m.group(1).lower()],
        text,
        flags=re.I,
    )


def _cut_clause(obj: str) -> str:
    """The object up to the first clause boundary; a trailing list ("X, Y and Z") is kept."""
    cut = CUT.search(obj)
    if cut:
        if re.match(r"\s*(?:who|which)\b", cut.group(0), re.I) and not obj[: cut.start()].rstrip().endswith(","):
            return ""  # a restrictive relative clause ("people who chew loudly") is part of the object
        obj = obj[: cut.start()]
    obj = obj.strip().rstrip(".!?…")
    if "," in obj:
        head, rest = obj.split(",", 1)
        obj = obj if LIST_TAIL.match(rest) and not (set(_words(rest)) & (FIRST_SUBJECT | SECOND_PERSON | UNRESOLVED)) else head
    obj = obj.strip()
    for _ in range(4):
        trimmed = TRAILING.sub("", obj).strip()
        if trimmed == obj:
            break
        obj = trimmed
    return obj.rstrip(" ,.!?")


def _noun_phrase(obj: str, *, max_words: int = 14) -> str | None:
    """The cleaned object when it reads on its own (see the module doc), else None."""
    obj = _cut_clause(obj)
    words = _words(obj)
    if not words or len(obj) < 3 or len(words) > max_words:
        return None
    bad = SECOND_PERSON | UNRESOLVED | FIRST_SUBJECT
    if any(w in bad for w in _words(TIME_DEICTIC.sub(" ", obj))):
        return None
    first, last = words[0], words[-1]
    if first in WH or first in VAGUE_START or " ".join(words[:2]) in VAGUE_START:
        return None
    if first == "to" and (len(words) < 2 or words[1] in COGNITIVE_INFINITIVE):
        return None
    if last in DANGLING:
        return None
    if first in {"the", "a", "an"} and len(words) <= 4 and (words[-1] in REACTIVE or words[1] in REACTIVE):
        return None
    if not any(len(w) >= 3 and w not in STOP for w in words):
        return None
    return _third_person_words(obj)


def _attr_value(attr: str, raw: str) -> str | None:
    """The value of a "my <attr> is <value>" statement when it is a crisp fact."""
    words = attr.split()
    head = words[-1]
    favourite = words[0] in {"favorite", "favourite", "fave", "fav"} and len(words) > 1
    if not favourite and head not in ATTR_HEADS:
        return None
    if head in {"number", "id", "no", "reference"} and words[0] in IDENT_NOUNS:
        return None  # an identifier: the identifier rule keeps it with its sentence
    if any(w in IDENT_NOUNS for w in words) and head not in {"email", "e-mail", "address", "plan", "tier"}:
        return None
    value = _cut_clause(raw)
    dated = re.match(r"(?:on|in|at) (?=[A-Z0-9])", value)  # "my birthday is on March 3rd"
    vwords = _words(value[dated.end():] if dated else value)
    if not vwords or vwords[0] in VALUE_BAD_START or " ".join(vwords[:2]) in VALUE_BAD_START:
        return None
    if head in FAMILY and vwords[0] not in {"a", "an"} and not value[:1].isupper():
        return None  # "my sister is visiting" is news, "my sister is a nurse" / "… is Anna" a fact
    return _noun_phrase(value, max_words=10)


class RuleBasedExtractor(Extractor):
    """Self-introductions ("I'm Maya", "my name is Bob", "call me Al"), preferences ("I prefer
    …", "my favourite band is …"), standing guidelines ("from now on, answer …", "always use
    …"), where the user lives, comes from and works, their job, whom they report to, allergies
    and diet, how to contact them, recurring meetings, "my <attribute> is <value>" facts for
    known attributes, ongoing activities ("I'm migrating …"), and identifiers with their sentence
    ("order 7421 arrived damaged …"). Single-valued facts carry a slot, so a new value supersedes
    the old one. Only user messages are read; the subject must be the user ("I", "we", "my"), and
    only confident, self-contained statements become memories (see the module doc)."""

    name = "rules"
    reads_summary = False

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        found: list[MemoryCandidate] = []
        seen: set[str] = set()

        def add(kind: str, content: str, entities: list[str], slot: str | None = None) -> None:
            content = _clip(content)
            key = content.lower()
            if key not in seen:
                seen.add(key)
                found.append(MemoryCandidate(type=kind, content=content, entities=entities, slot=slot))  # type: ignore[arg-type]

        for msg in context.messages:
            if msg.record_id in context.new_message_ids and msg.role == "user":
                self._scan(msg, add)
        return ExtractionOutput(memories=found[:30])

    def _scan(self, msg: Record, add: Add) -> None:
        # questions state nothing ("Who is my manager?"): only statements are scanned
        statements = [s for s in _sentences(msg.content) if not s.endswith("?")]
        for sentence in statements:
            self._scan_sentence(sentence, add)
        self._scan_identifiers(" ".join(statements), add)

    def _scan_sentence(self, s: str, add: Add) -> None:  # noqa: C901 - one flat list of rules
        def ok(match: re.Match[str]) -> bool:
            return _asserted(s, match.start())

        self._scan_names(s, add)
        for match in PREFERENCE.finditer(s):
            obj = _noun_phrase(match.group(2))
            if obj and ok(match):
                add("preference", f"The user {_third_person(match.group(1).lower())} {obj}.", [])
        for match in FAN.finditer(s):
            obj = _noun_phrase(match.group(1))
            if obj and ok(match):
                add("preference", f"The user is a fan of {obj}.", [])
        if GUIDELINE.search(s) and not CONTACT.search(s):  # contact wishes are a slotted preference below
            add("guideline", f"User instruction: {s}", [])
        for pattern in (LIVES, LIVES_WHERE):
            for match in pattern.finditer(s):
                if ok(match):
                    add("fact", f"The user lives in {match.group(1)}.", [match.group(1)], "user.city")
        for match in FROM.finditer(s):
            if ok(match):
                add("fact", f"The user is from {match.group(1)}.", [match.group(1)], "user.origin")
        for index, pattern in enumerate(PET):
            for match in pattern.finditer(s):
                kind, name = (match.group(2).lower(), match.group(1)) if index == 2 else (match.group(1).lower(), match.group(2))
                kind = {"puppy": "dog", "kitten": "cat"}.get(kind, kind)
                if ok(match) and name.lower() not in NOT_NAMES:
                    add("fact", f"The user's {kind} is called {name}.", [name], f"user.{kind}_name")
        for index, pattern in enumerate(WORKS):
            for match in pattern.finditer(s):
                if ok(match) and (index != 1 or JOB_CONTEXT.search(s)):
                    add("fact", f"The user works at {match.group(1)}.", [match.group(1)], "user.employer")
        for match in WORKS_AS.finditer(s):
            job = _noun_phrase(re.split(r"\s+(?:at|for|in|with|on)\s+", match.group(1))[0], max_words=6)
            if job and ok(match):
                add("fact", f"The user works as {job}.", [], "user.job")
        for match in I_AM_A.finditer(s):
            phrase, head = match.group(1), match.group(2).lower()
            two = " ".join(phrase.lower().split()[-2:])
            if (head in OCCUPATIONS or two in OCCUPATIONS) and ok(match) and not re.search(r"\b(?:bit|kind|sort|little|of|like)\b", phrase, re.I):
                add("fact", f"The user is {phrase}.", [], "user.job")
        for match in DIET.finditer(s):
            if ok(match):
                add("fact", f"The user is {match.group(1).lower()}.", [], "user.diet")
        for match in REPORTS.finditer(s):
            if ok(match):
                add("fact", f"The user's manager is {match.group(1)}.", [match.group(1)], "user.manager")
        for match in ALLERGY.finditer(s):
            what = _noun_phrase(match.group(1), max_words=8)
            if what and ok(match):
                add("fact", f"The user is allergic to {what}.", [what])
        for match in CONTACT.finditer(s):
            if ok(match):
                channel = _third_person_words(match.group(1).strip())
                prep = "at" if re.fullmatch(rf"{EMAIL}|{PHONE}", channel) else "on"
                add("preference", f"The user wants to be contacted {prep} {channel}.", [channel], "user.contact_channel")
        for match in MEETING.finditer(s):
            if OTHERS.search(match.group(0)) or not ok(match):
                continue  # someone else's meeting ("the sync at their company")
            kind, day = match.group(1).lower(), match.group(2).capitalize()
            add("fact", f"The user's recurring {kind} is on {day}.", [day], f"user.{kind}_day")
        for match in MY_ATTR.finditer(s):
            attr = match.group(1).strip().lower()
            before = s[: match.start()]
            if not (not before.strip() or re.search(r"[,:;–—-]\s*$", before) or set(_words(before)) <= INTERJECTIONS):
                continue  # "the reason my code is slow is …": "my" is not the subject
            if attr in ATTR_SKIP or attr.split()[-1] in ATTR_SKIP or MEETING.search(match.group(0)) or not ok(match):
                continue
            value = _attr_value(attr, match.group(2))
            if value:
                favourite = attr.split()[0] in {"favorite", "favourite", "fave", "fav"}
                add("preference" if favourite else "fact", f"The user's {attr} is {value}.", [value], f"user.{attr.replace(' ', '_')}")
        for match in ACTIVITY.finditer(s):
            verb = match.group(1).lower()
            if verb == "moving" and not MOVING_OBJECT.match(match.group(2)):
                continue
            if verb == "writing" and match.group(2).lower().startswith("to "):
                continue  # "I'm writing to complain …"
            obj = _noun_phrase(match.group(2))
            if obj and ok(match):
                add("memory", f"The user is {verb} {obj}.", [])
        for match in FAILING.finditer(s):
            add("fact", f"The {match.group(1).lower()} {match.group(2).lower()} is {match.group(3).strip()}.", [match.group(3).strip()],
                f"problem.{match.group(1).lower()}_{match.group(2).lower()}")

    def _scan_names(self, s: str, add: Add) -> None:
        for pattern, kind in NAME_PATTERNS:
            for match in pattern.finditer(s):
                name = match.group(1)
                low = name.lower()
                if low in NOT_NAMES or not _asserted(s, match.start()):
                    continue
                if kind != "name" and (not name[0].isupper() or low in NOT_NAME_WORDS):
                    continue  # "call me anytime", "I'm Canadian"
                if kind == "intro" and not NAME_FOLLOW.match(s[match.end():]):
                    continue  # "I'm Going to …": a capitalised word, not a name
                name = name[0].upper() + name[1:]
                if kind == "call":
                    add("preference", f"The user wants to be called {name}.", [name], "user.preferred_name")
                else:
                    add("fact", f"The user's name is {name}.", [name], "user.name")

    def _scan_identifiers(self, text: str, add: Add) -> None:
        for match in [*IDENT.finditer(text), *IDENT_IS.finditer(text)]:
            ident = f"{match.group(1).lower()} {match.group(2)}"
            sentence = _sentence_with(text, match.start())
            after = text[text.find(sentence) + len(sentence):].strip()
            follow = SENTENCE.match(after)
            if follow and follow.group(0).strip():
                sentence = f"{sentence} {follow.group(0).strip()}"
            add("fact", f"User reported ({ident}): {sentence}" if PROBLEM.search(sentence) else f"User mentioned {ident}: {sentence}", [ident])


def _third_person(verb: str) -> str:
    return {
        "prefer": "prefers", "like": "likes", "love": "loves", "adore": "adores", "enjoy": "enjoys", "hate": "hates",
        "dislike": "dislikes", "don't like": "does not like", "do not like": "does not like",
        "don't enjoy": "does not enjoy", "can't stand": "cannot stand", "cannot stand": "cannot stand",
    }.get(verb, verb)
