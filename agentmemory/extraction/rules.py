"""The rule-based extractor: offline, no LLM. It captures what matters most in a chat —
who the user is, stated preferences, standing instructions and explicit identifiers — with
conservative patterns (precision over recall). Custom instructions are not interpreted.
"""

from __future__ import annotations

import re
from typing import Any

from ..records import Record
from .base import Extractor
from .models import MAX_MEMORY_CHARS, ExtractionContext, ExtractionOutput, MemoryCandidate

_NOT_NAMES = {
    "a", "an", "the", "not", "so", "sorry", "fine", "good", "here", "just", "also", "still", "back",
    "happy", "glad", "sure", "ok", "okay", "afraid", "looking", "trying", "working", "migrating",
    "going", "having", "new", "done", "ready", "interested", "using", "building", "currently",
}
_NAME = r"([A-Za-z][\w'-]{1,30})"
_NAME_PATTERNS = [
    (re.compile(rf"\bmy name is {_NAME}", re.I), "name"),
    (re.compile(rf"\b(?:call me|you can call me|please call me) {_NAME}", re.I), "call"),
    (re.compile(rf"(?:^|[.!?,]\s*|\b(?:hi|hello|hey)[,!]?\s+)(?:i'm|i am|this is) {_NAME}\b", re.I), "intro"),
]
_PREFERENCE = re.compile(
    r"\bI(?: really| strongly| usually| always)? (prefer|like|love|enjoy|hate|dislike|don't like|do not like|can't stand)\s+([^.!?\n]{3,160})",
    re.I,
)
_GUIDELINE = re.compile(  # a standing instruction opens its sentence ("Always …", "Please never …")
    r"(?:^|[.!?:]\s+|\bplease\s+)(?:from now on|going forward|in (?:the )?future|always|never)\b[, ]*([^.!?\n]{5,200})",
    re.I | re.M,
)
_MY_ATTR = re.compile(r"\bmy ([a-z][a-z ]{1,30}?) (?:is|are) ([^.!?\n,]{2,120})", re.I)
_ACTIVITY = re.compile(
    r"\bI(?:'m| am|'ve been| have been) (migrating|working on|building|debugging|planning|moving|setting up|writing|learning|preparing)\s+([^.!?\n]{3,200})",
    re.I,
)
_IDENT = re.compile(
    r"\b(order|invoice|ticket|case|account|booking|reservation|shipment|contract|claim)\s*(?:#|no\.?|number|id)?\s*([A-Z]{0,5}-?\d[\w-]{2,})",
    re.I,
)
_PROPER = r"([A-Z][\w&'-]*(?: (?:[A-Z][\w&'-]*|de|del|am|on|upon))*)"
_LIVES = re.compile(rf"\b(?:I|we)(?:'ve| have)? (?:now )?(?:live|lives|living|relocated|moved) (?:in|to) {_PROPER}")
_WORKS = [
    re.compile(rf"\bI (?:now )?(?:work|am working|'m working) (?:at|for) {_PROPER}"),
    re.compile(rf"\bI(?:'m| am) (?:now )?at {_PROPER} now\b"),
    re.compile(rf"\bmy (?:new )?(?:employer|company) is {_PROPER}", re.I),
]
_LIVES_WHERE = re.compile(rf"\bin {_PROPER},? (?:it's |that's |which is )?where (?:I|we) live")
_PET = [
    re.compile(rf"\bmy (dog|cat|pet)(?:'s name)? is (?:called |named )?{_PROPER}", re.I),
    re.compile(rf"{_PROPER}, my (dog|cat)\b"),
]
_REPORTS = re.compile(rf"\b(?:I report to|[Mm]y (?:new )?(?:manager|boss) is) {_PROPER}")
_ALLERGY = re.compile(r"\bI(?:'m| am) allergic to ([^.!?\n,;]{2,60})", re.I)
_CONTACT = re.compile(r"\b(?:message|contact|reach|text|ping|email|call) me (?:on|at|via|by|through) ([^.!?\n,;]{2,60})", re.I)
_MEETING = re.compile(
    r"\b(?:my|our|the)(?: weekly| team| daily| monthly)? (sync|meeting|standup|stand-up|one-on-one|1:1)\b[^.!?\n]{0,40}?"
    r"\b(?:is on|is every|is now on|moved to|happens on|every|on) ((?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?)",
    re.I,
)
_OTHERS = re.compile(r"\b(?:their|his|her|your)\b", re.I)
_IDENT_IS = re.compile(
    r"\b(order|invoice|ticket|case|account|booking|reservation|shipment|contract|claim)\b[^.!?\n]{0,60}?\b(?:is|number|no\.?|id|#)\s*:?\s*([A-Z]{0,5}-?\d[\w-]{2,})",
    re.I,
)
_PROBLEM = re.compile(r"\b(fail\w*|error\w*|broken|crash\w*|damaged|missing|late|wrong|refund|return|bug)\b", re.I)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


def _sentence_with(text: str, start: int) -> str:
    for match in _SENTENCE.finditer(text):
        if match.start() <= start < match.end():
            return match.group(0).strip()
    return text.strip()


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MEMORY_CHARS else text[: MAX_MEMORY_CHARS - 1] + "…"


class RuleBasedExtractor(Extractor):
    """Self-introductions ("I'm Maya", "my name is Bob", "call me Al"), preferences ("I prefer
    …"), standing guidelines ("from now on …", "always …"), where the user lives and works, whom
    they report to, allergies, how to contact them, recurring meetings, "my X is Y" facts,
    ongoing activities ("I'm migrating …"), and identifiers with their sentence ("order 7421
    arrived damaged …"). Single-valued facts carry a slot, so a new value supersedes the old one.
    Only user messages are read; the subject must be the user ("I", "we", "my")."""

    name = "rules"

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

    def _scan(self, msg: Record, add: Any) -> None:
        # questions state nothing ("Who is my manager?"): only statements are scanned
        text = " ".join(m.group(0).strip() for m in _SENTENCE.finditer(msg.content) if not m.group(0).strip().endswith("?"))
        for pattern, kind in _NAME_PATTERNS:
            for match in pattern.finditer(text):
                name = match.group(1)
                if name.lower() in _NOT_NAMES or (kind == "intro" and not name[0].isupper()):
                    continue
                name = name[0].upper() + name[1:]
                if kind == "call":
                    add("preference", f"The user wants to be called {name}.", [name], "user.preferred_name")
                else:
                    add("fact", f"The user's name is {name}.", [name], "user.name")
        for match in _PREFERENCE.finditer(text):
            verb, obj = match.group(1).lower(), match.group(2).strip()
            add("preference", f"The user {_third_person(verb)} {obj}.", [])
        for match in _GUIDELINE.finditer(text):
            sentence = _sentence_with(text, match.end() - 1)
            if not _CONTACT.search(sentence):  # contact wishes are a slotted preference below
                add("guideline", f"User instruction: {sentence}", [])
        for match in _LIVES.finditer(text):
            add("fact", f"The user lives in {match.group(1)}.", [match.group(1)], "user.city")
        for match in _LIVES_WHERE.finditer(text):
            add("fact", f"The user lives in {match.group(1)}.", [match.group(1)], "user.city")
        for index, pattern in enumerate(_PET):
            for match in pattern.finditer(text):
                kind, name = (match.group(1).lower(), match.group(2)) if index == 0 else (match.group(2).lower(), match.group(1))
                add("fact", f"The user's {kind} is called {name}.", [name], f"user.{kind}_name")
        for pattern in _WORKS:
            for match in pattern.finditer(text):
                add("fact", f"The user works at {match.group(1)}.", [match.group(1)], "user.employer")
        for match in _REPORTS.finditer(text):
            add("fact", f"The user's manager is {match.group(1)}.", [match.group(1)], "user.manager")
        for match in _ALLERGY.finditer(text):
            add("fact", f"The user is allergic to {match.group(1).strip()}.", [match.group(1).strip()])
        for match in _CONTACT.finditer(text):
            add("preference", f"The user wants to be contacted on {match.group(1).strip()}.", [match.group(1).strip()], "user.contact_channel")
        for match in _MEETING.finditer(text):
            if _OTHERS.search(match.group(0)):
                continue  # someone else's meeting ("the sync at their company")
            kind, day = match.group(1).lower(), match.group(2).capitalize()
            add("fact", f"The user's recurring {kind} is on {day}.", [day], f"user.{kind}_day")
        for match in _MY_ATTR.finditer(text):
            attr, value = match.group(1).strip().lower(), match.group(2).strip()
            if attr in {"name", "dog", "cat", "pet", "manager"} or _MEETING.search(match.group(0)):
                continue
            if attr in {"employer", "company"}:
                continue  # covered by _WORKS with the shared slot
            add("fact", f"The user's {attr} is {value}.", [value], f"user.{attr.replace(' ', '_')}")
        for match in _ACTIVITY.finditer(text):
            add("memory", f"The user is {match.group(1).lower()} {match.group(2).strip()}.", [])
        for match in [*_IDENT.finditer(text), *_IDENT_IS.finditer(text)]:
            ident = f"{match.group(1).lower()} {match.group(2)}"
            sentence = _sentence_with(text, match.start())
            after = text[text.find(sentence) + len(sentence):].strip()
            follow = _SENTENCE.match(after)
            if follow and follow.group(0).strip():
                sentence = f"{sentence} {follow.group(0).strip()}"
            kind = "fact"
            add(kind, f"User reported ({ident}): {sentence}" if _PROBLEM.search(sentence) else f"User mentioned {ident}: {sentence}", [ident])
        for match in re.finditer(r"\b(?:the )?(failing|broken) (step|part|job|stage|test) (?:right now |currently )?is ([^.!?\n]{3,160})", text, re.I):
            add("fact", f"The {match.group(1).lower()} {match.group(2).lower()} is {match.group(3).strip()}.", [match.group(3).strip()], f"problem.{match.group(1).lower()}_{match.group(2).lower()}")


def _third_person(verb: str) -> str:
    return {
        "prefer": "prefers", "like": "likes", "love": "loves", "enjoy": "enjoys", "hate": "hates",
        "dislike": "dislikes", "don't like": "does not like", "do not like": "does not like",
        "can't stand": "cannot stand",
    }.get(verb, verb)

