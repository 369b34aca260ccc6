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

Add = Callable[..., None]

# ---- word lists ---------------------------------------------------------------------------------
_NOT_NAMES = {
    "a", "an", "the", "not", "so", "sorry", "fine", "good", "here", "just", "also", "still", "back",
    "happy", "glad", "sure", "ok", "okay", "afraid", "looking", "trying", "working", "migrating",
    "going", "having", "new", "done", "ready", "interested", "using", "building", "currently",
    "at", "on", "in", "when", "whenever", "anytime", "later", "tomorrow", "tonight", "now",
    "soon", "if", "after", "before", "maybe", "crazy", "old", "out", "home", "there", "from",
}
_NOT_NAME_WORDS = {  # capitalised words after "I'm" that describe, not name, the speaker
    "american", "canadian", "mexican", "brazilian", "argentinian", "chilean", "peruvian", "colombian",
    "british", "english", "scottish", "welsh", "irish", "french", "german", "dutch", "belgian", "swiss",
    "austrian", "italian", "spanish", "portuguese", "greek", "turkish", "polish", "czech", "slovak",
    "hungarian", "romanian", "bulgarian", "serbian", "croatian", "ukrainian", "russian", "swedish",
    "norwegian", "danish", "finnish", "icelandic", "estonian", "latvian", "lithuanian", "indian",
    "pakistani", "bangladeshi", "chinese", "japanese", "korean", "vietnamese", "thai", "filipino",
    "indonesian", "malaysian", "australian", "kiwi", "nigerian", "kenyan", "ghanaian", "egyptian",
    "moroccan", "ethiopian", "african", "european", "asian", "latino", "latina", "hispanic", "arab",
    "persian", "iranian", "israeli", "jewish", "muslim", "christian", "catholic", "protestant",
    "hindu", "buddhist", "sikh", "atheist", "agnostic", "mormon", "orthodox", "vegan", "vegetarian",
    "gay", "lesbian", "bi", "trans", "queer", "straight", "single", "married", "divorced", "retired",
    "sorry", "back", "here", "ok", "okay", "fine", "good", "great", "done", "ready", "still", "always",
}
_SECOND_PERSON = {"you", "your", "yours", "yourself", "yourselves", "you're", "you've", "you'll", "you'd", "u", "ur", "y'all", "ya", "youre"}
_UNRESOLVED = {  # pronouns and demonstratives whose referent is outside the sentence
    "it", "its", "it's", "this", "that", "these", "those", "he", "she", "him", "her", "his", "hers",
    "they", "them", "their", "theirs", "one", "ones", "both", "either", "neither", "such", "there",
    "here", "same", "stuff", "he's", "she's", "they're", "that's", "thats", "this's",
}
_FIRST_SUBJECT = {"i", "i'm", "i've", "i'd", "i'll", "im", "ive", "we", "we're", "we've", "we'd", "we'll"}
_FIRST_TO_THIRD = {
    "me": "them", "my": "their", "mine": "theirs", "myself": "themselves", "our": "their",
    "us": "them", "ours": "theirs", "ourselves": "themselves",
}
_WH = {"what", "how", "when", "where", "why", "who", "whom", "whose", "which", "whether", "if", "whatever", "wherever", "whenever", "because", "so", "than", "like", "as"}
_VAGUE_START = {
    "something", "anything", "everything", "nothing", "stuff", "things", "lots", "more", "most", "all",
    "some", "any", "many", "much", "so", "too", "very", "a lot", "less", "only", "just", "such", "other", "others",
    "not", "no",
}
_DANGLING = {  # an object ending on one of these was cut off mid-phrase
    "a", "an", "the", "some", "any", "few", "several", "many", "much", "more", "all", "every", "each",
    "no", "of", "to", "for", "with", "in", "on", "at", "by", "from", "about", "into", "onto", "and",
    "or", "but", "than", "as", "their", "very", "really", "so", "too", "just", "like", "such", "lot",
    "bit", "couple", "kind", "sort", "quite", "rather", "this", "that", "my", "our", "is", "are",
    "was", "were", "be", "been", "not", "your", "it", "if", "when", "because", "other", "another",
}
_REACTIVE = {  # "the <noun>" refers to something just shown or said ("I love the colors!")
    "idea", "ideas", "sound", "look", "looks", "vibe", "vibes", "energy", "color", "colors", "colour",
    "colours", "photo", "photos", "picture", "pictures", "pic", "pics", "shot", "shots", "view", "design",
    "details", "detail", "result", "results", "name", "style", "approach", "way", "plan", "update",
    "suggestion", "suggestions", "answer", "thought", "sentiment", "concept", "one", "ones", "version",
    "solution", "option", "options", "choice", "painting", "drawing", "video", "song", "post", "message",
    "story", "outfit", "dress", "setup", "feature", "change", "changes", "new", "first", "second", "last",
}
_STOP = {
    "a", "an", "the", "to", "of", "in", "on", "at", "for", "with", "and", "or", "is", "be", "my", "their",
    "them", "very", "really", "so", "too", "just", "some", "any", "get", "go", "do", "make",
}
_COGNITIVE_INFINITIVE = {
    "think", "say", "know", "believe", "imagine", "hear", "see", "help", "admit", "tell", "ask", "point",
    "mention", "add", "chat", "talk", "be", "hope", "pretend", "guess", "complain", "report", "inform",
    "let", "follow", "check", "confirm", "share", "update", "remind", "apologize", "apologise", "thank",
}
_TRAILING = re.compile(
    r"(?:\s+(?:a lot|so much|very much|too|as well|anyway|anyways|though|tbh|honestly|lol|haha\w*|"
    r"really|a ton|again|lately|now|right now|already|also|either|instead|best|most|at all|i guess|for sure|"
    r"these days|nowadays))+$",
    re.I,
)
# a clause boundary inside an object: what follows is not part of the thing liked / worked on
_CUT = re.compile(
    r"\s*(?:[;:()\"]|\s[-–—]\s|\b(?:but|because|cause|cuz|bc|since|though|although|so|when|whenever|while|"
    r"which|who|unless|if|until|whereas|lol|haha\w*|lmao|tbh|and (?:i|i'm|i've|it|it's|that|we|he|she|they|you|"
    r"my|the)|plus|especially|except|even)\b)",
    re.I,
)
_LIST_TAIL = re.compile(r"^(?:\s*[\w'@.+-]+(?: [\w'@.+-]+){0,3},)*\s*(?:and|or) [\w'@.+-]+(?: [\w'@.+-]+){0,3}\s*$", re.I)

# ---- sentence frames ---------------------------------------------------------------------------
# words before the match (in its clause) that make the statement hypothetical, reported, hedged
# or negated
_HEDGE_BEFORE = re.compile(
    r"\b(?:if|unless|whether|maybe|perhaps|might|would|could|should|wish|hope|hoping|suppose|supposing|"
    r"imagine|pretend|said|says|say|told|tells|tell|think|thinks|thought|guess|asked|asks|wonder\w*|"
    r"not|never|don't|doesn't|didn't|dont|dunno|doubt|pretending|wants?|wanted|claims?|claimed|"
    r"heard|hears|apparently|supposedly|used|once|whenever|when)\b|'d\b",
    re.I,
)
_HEDGE_ANYWHERE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i suppose|i believe|not sure|i doubt|"
    r"kind of|sort of|kinda|sorta|i wonder|apparently|supposedly|in theory|hypothetically|pretend|jk|just kidding)\b",
    re.I,
)
_CLAUSE_BREAK = re.compile(r"[,;:–—]|\b(?:but|and|so|then|anyway|also)\b", re.I)
_INTERJECTIONS = {
    "oh", "and", "also", "btw", "actually", "well", "so", "ok", "okay", "yeah", "yes", "no", "hi",
    "hey", "hello", "fyi", "update", "plus", "now", "but", "by", "the", "way", "ps", "honestly",
    "anyway", "sorry", "just", "reminder", "note", "heads", "up", "funny", "enough", "fun", "fact",
}

# ---- patterns -----------------------------------------------------------------------------------
_NAME = r"([A-Za-z][\w'-]{1,30})"
_NAME_PATTERNS = [
    (re.compile(rf"\b(?i:my name is|my name's) {_NAME}"), "name"),
    (re.compile(rf"\b(?i:call me|you can call me|please call me) {_NAME}"), "call"),
    (re.compile(rf"(?:^|[.!?,]\s*|\b(?i:hi|hello|hey)[,!]?\s+)(?i:i'm|i am) {_NAME}\b"), "intro"),
    (re.compile(rf"\b(?i:hi|hello|hey)[,!]?\s+(?i:this is|it's) {_NAME}\b"), "intro"),
    (re.compile(rf"(?:^|[.!?,]\s*)(?i:this is) {_NAME}(?= (?i:from|speaking|here)\b)"), "intro"),
]
_NAME_FOLLOW = re.compile(r"\s*(?:$|[,.!;:)]|and\b|from\b|here\b|by\b|speaking\b|btw\b|-)", re.I)
_ADVERBS = r"(?: (?:really|strongly|usually|always|absolutely|just|also|totally|genuinely|honestly|still|definitely|generally|actually|truly|kinda|much))*"
_PREFERENCE = re.compile(
    rf"\b(?:I|i){_ADVERBS} (prefer|like|love|adore|enjoy|hate|dislike|don't like|do not like|don't enjoy|can't stand|cannot stand)\s+(.{{3,200}})",
)
_FAN = re.compile(rf"\b(?:I'm|I am|i'm|im){_ADVERBS} (?:a )?(?:huge |big |massive |real )?fan of (.{{3,160}})")
_GUIDELINE_VERBS = (
    "answer|reply|respond|write|use|include|add|give|show|explain|format|keep|put|start|begin|end|mention|"
    "ask|check|double-check|confirm|cite|call|refer|address|speak|talk|suggest|recommend|avoid|assume|send|cc|"
    "remind|tell|list|sort|make|stick|treat|translate|summarize|summarise|provide|skip|omit|wrap|return|"
    "prefix|number|label|highlight|test|run|commit|push|be|do|don't|do not|stop|consider|let|message|contact|"
    "email|text|ping|notify|offer|quote|link|comment|document|spell|round|convert|default|stay|write|reply|"
    "greet|sign|close|open|show|limit|favor|favour|prioritize|prioritise|go|try|leave|put|respect"
)
_GUIDELINE = re.compile(  # a standing instruction opens its sentence ("Always …", "Please never …") with an imperative
    rf"(?:^|[.!?:]\s+|\bplease\s+)(?:from now on|going forward|in (?:the )?future|always|never)\b[, ]*(?:please[, ]+)?"
    rf"(?:{_GUIDELINE_VERBS})\b",
    re.I | re.M,
)
_MY_ATTR = re.compile(r"\b(?i:my) ([a-z][a-z'-]*(?: [a-z][a-z'-]*){0,2}) (?:is|are) (.{1,160})")
_ATTR_HEADS = {
    "birthday", "email", "e-mail", "address", "hometown", "timezone", "zone", "editor", "ide", "os", "stack",
    "language", "languages", "laptop", "computer", "phone", "car", "major", "degree", "nationality",
    "username", "handle", "budget", "deadline", "goal", "role", "title", "position", "shift", "schedule",
    "number", "wife", "husband", "partner", "boyfriend", "girlfriend", "son", "daughter", "brother",
    "sister", "mom", "mum", "dad", "mother", "father", "fiance", "fiancé", "fiancee", "hobby", "hobbies",
    "diet", "specialty", "field", "school", "university", "college", "team", "department", "size",
    "blood", "age", "gender", "pronouns", "surname", "nickname", "sign", "website", "github", "browser",
    "distro", "shell", "setup", "plan", "tier", "hours",
}
_FAMILY = {
    "wife", "husband", "partner", "boyfriend", "girlfriend", "son", "daughter", "brother", "sister",
    "mom", "mum", "dad", "mother", "father", "fiance", "fiancé", "fiancee",
}
_IDENT_NOUNS = {"order", "invoice", "ticket", "case", "account", "booking", "reservation", "shipment", "contract", "claim"}
_ATTR_SKIP = {"name", "dog", "cat", "pet", "manager", "boss", "employer", "company"}
_VALUE_BAD_START = {
    "so", "very", "really", "too", "pretty", "quite", "super", "kind", "sort", "not", "still", "always",
    "never", "just", "getting", "going", "broken", "down", "great", "awesome", "terrible", "bad", "good",
    "fine", "ok", "okay", "important", "busy", "full", "done", "over", "gone", "late", "due", "coming",
    "almost", "about", "like", "more", "less", "visiting", "sick", "away", "out", "off", "on", "in",
    "back", "home", "here", "there", "all", "that", "what", "how", "a bit", "kinda", "sorta", "probably",
    "currently", "being", "having", "making", "driving", "killing", "amazing", "annoying", "crazy",
    "huge", "tiny", "weird", "strange", "hard", "easy", "nice", "cool", "lovely", "fun", "boring",
    "stressful", "tough", "rough", "tight", "perfect", "the same", "same", "different", "nothing",
}
_ACTIVITY = re.compile(
    r"\b(?:I|i)(?:'m| am|'ve been| have been|m| currently am|'m currently|'m still|'m now) "
    r"(migrating|working on|building|debugging|planning|moving|setting up|writing|learning|preparing|studying|"
    r"training for|volunteering at|renovating|refactoring|organizing|organising|practicing|practising|"
    r"saving up for|saving for|redesigning|rewriting|developing|designing)\s+(.{3,200})",
)
_MOVING_OBJECT = re.compile(r"^(?:to|into|back to|abroad|house|home|out of|in with|across)\b", re.I)
_IDENT = re.compile(
    r"\b(order|invoice|ticket|case|account|booking|reservation|shipment|contract|claim)\s*(?:#|no\.?|number|id|ref\.?|reference)?\s*([A-Z]{0,5}-?\d[\w-]{2,})",
    re.I,
)
_PROPER = r"([A-Z][\w&'-]*(?: (?!I\b|I'|I’)(?:[A-Z][\w&'-]*|de|del|am|on|upon))*)"
_LIVES = re.compile(rf"\b(?:I|[Ww]e)(?:'ve| have)? (?:now )?(?:live|lives|living|relocated|moved) (?:in|to) {_PROPER}")
_WORKS = [
    re.compile(rf"\bI (?:now )?(?:work|am working|'m working) (?:at|for) {_PROPER}"),
    re.compile(rf"\bI(?:'m| am) (?:now )?at {_PROPER} now\b"),
    re.compile(rf"\b[Mm]y (?:new )?(?:employer|company) is {_PROPER}"),
]
_JOB_CONTEXT = re.compile(r"\b(?:job|jobs|work|working|worked|switched|joined|hired|employer|role|position|company|started)\b", re.I)
_WORKS_AS = re.compile(r"\bI (?:now )?(?:work|am working|'m working) as (an? [^.!?\n,;]{2,80})")
_OCCUPATIONS = {
    "engineer", "developer", "programmer", "teacher", "nurse", "doctor", "lawyer", "designer", "student",
    "accountant", "scientist", "analyst", "consultant", "chef", "cook", "writer", "artist", "musician",
    "photographer", "architect", "pharmacist", "dentist", "librarian", "electrician", "plumber", "mechanic",
    "carpenter", "researcher", "professor", "lecturer", "firefighter", "paramedic", "pilot", "baker",
    "barista", "farmer", "therapist", "counselor", "counsellor", "journalist", "editor", "translator",
    "veterinarian", "vet", "freelancer", "entrepreneur", "founder", "intern", "retiree", "administrator",
    "sysadmin", "technician", "recruiter", "marketer", "cashier", "waiter", "waitress", "bartender",
    "tutor", "coach", "surgeon", "physiotherapist", "psychologist", "economist", "statistician",
    "mathematician", "physicist", "chemist", "biologist", "paralegal", "midwife", "caregiver", "carer",
    "officer", "soldier", "veteran", "manager", "director", "ceo", "cto", "cfo",
    "product manager", "data scientist", "nanny", "social worker", "phd student", "postdoc",
}
_I_AM_A = re.compile(r"\b(?:I'm|I am|i'm|im) (an? (?:[\w-]+ ){0,3}?([\w-]+))(?=\s*(?:$|[,.!;:]|and\b|by\b|at\b|for\b|in\b|with\b|who\b|so\b|but\b|now\b))")
_DIET = re.compile(r"\b(?:I'm|I am|i'm|im) (?:a )?(vegetarian|vegan|pescatarian|lactose intolerant|gluten intolerant|celiac|coeliac|diabetic|teetotal)\b")
_FROM = re.compile(rf"\b(?:I'm|I am|i'm) (?:originally )?from {_PROPER}")
_LIVES_WHERE = re.compile(rf"\bin {_PROPER},? (?:it's |that's |which is )?where (?:I|we) live")
_PET = [
    re.compile(rf"\b[Mm]y (dog|cat|pet)(?:'s name)? is (?:called |named )?{_PROPER}"),
    re.compile(rf"\b[Mm]y (dog|cat|pet)\b[^.!?\n]{{0,40}}?\b(?:named|called) {_PROPER}"),
    re.compile(rf"{_PROPER}, my (dog|cat)\b"),
    re.compile(rf"\b(?:I|[Ww]e)(?: just| recently)? (?:have|adopted|got|rescued) an? (?:[\w-]+ ){{0,3}}?(dog|cat|puppy|kitten)\b[^.!?\n]{{0,30}}?\b(?:named|called) {_PROPER}"),
]
_REPORTS = re.compile(rf"\b(?:I report to|[Mm]y (?:new )?(?:manager|boss) is) {_PROPER}")
_ALLERGY = re.compile(r"\bI(?:'m| am)(?: very| severely| seriously| mildly)? allergic to ([^.!?\n,;]{2,60})", re.I)
_CHANNELS = (
    r"(?:(?:my |our )?(?:work |personal |private )?(?:e-?mail|cell|mobile|phone|landline))|Signal|Telegram|WhatsApp|Slack|"
    r"(?:Microsoft )?Teams|Discord|Matrix|SMS|iMessage|WeChat|Messenger|LinkedIn|Skype|Viber|Threema|Zoom"
)
_EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_PHONE = r"\+?\d[\d\s().-]{6,}\d"
_CONTACT = re.compile(
    rf"\b(?i:message|contact|reach|text|ping|email|e-mail|call|dm|write) (?i:me) (?i:on|at|via|by|through|over|using) "
    rf"({_EMAIL}|{_PHONE}|(?i:{_CHANNELS}))(?!\w)",
)
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
_PROBLEM = re.compile(r"\b(fail\w*|error\w*|broken|crash\w*|damaged|missing|late|wrong|refund|return|bug|crack\w*|charged)\b", re.I)
_FAILING = re.compile(r"\b(?:the )?(failing|broken) (step|part|job|stage|test) (?:right now |currently )?is ([^.!?\n,;]{3,160})", re.I)
# a sentence ends at . ! ? or a line break; dots inside words (emails, versions, "e.g") do not end it
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=[\w@/-]))+[.!?]*")
_TIME_DEICTIC = re.compile(  # "this summer", "next week": a time, not an unresolved "this"
    r"\b(?:this|that|next|last|these|those) (?:morning|afternoon|evening|night|week|weekend|month|year|summer|winter|"
    r"spring|fall|autumn|semester|term|quarter|season|time|days|weeks|months|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b",
    re.I,
)
_WORD = re.compile(r"[\w'’@.+/-]+")


def _sentences(text: str) -> list[str]:
    return [m.group(0).strip() for m in _SENTENCE.finditer(text) if m.group(0).strip()]


def _sentence_with(text: str, start: int) -> str:
    for match in _SENTENCE.finditer(text):
        if match.start() <= start < match.end():
            return match.group(0).strip()
    return text.strip()


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MEMORY_CHARS else text[: MAX_MEMORY_CHARS - 1] + "…"


def _words(text: str) -> list[str]:
    return [w.strip(".'’").lower() for w in _WORD.findall(text) if w.strip(".'’")]


def _asserted(sentence: str, start: int) -> bool:
    """Whether the match at ``start`` is a plain statement: nothing in its clause before it
    makes it hypothetical, hedged, reported or negated, and the sentence has no hedge."""
    if _HEDGE_ANYWHERE.search(sentence):
        return False
    before = sentence[:start]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    clause = before[breaks[-1].end():] if breaks else before
    if _HEDGE_BEFORE.search(clause):
        return False
    # "if I …, I'd …": a conditional opening the sentence governs the whole of it
    return not re.match(r"\s*(?:if|unless|when|whenever|once|suppose|imagine|what if|even if)\b", before, re.I)


def _third_person_words(text: str) -> str:
    """First-person possessives and objects → third person ("my dad" → "their dad")."""
    return re.sub(
        r"\b(me|my|mine|myself|our|us|ours|ourselves)\b",
        lambda m: _FIRST_TO_THIRD[m.group(1).lower()],
        text,
        flags=re.I,
    )


def _cut_clause(obj: str) -> str:
    """The object up to the first clause boundary; a trailing list ("X, Y and Z") is kept."""
    cut = _CUT.search(obj)
    if cut:
        if re.match(r"\s*(?:who|which)\b", cut.group(0), re.I) and not obj[: cut.start()].rstrip().endswith(","):
            return ""  # a restrictive relative clause ("people who chew loudly") is part of the object
        obj = obj[: cut.start()]
    obj = obj.strip().rstrip(".!?…")
    if "," in obj:
        head, rest = obj.split(",", 1)
        obj = obj if _LIST_TAIL.match(rest) and not (set(_words(rest)) & (_FIRST_SUBJECT | _SECOND_PERSON | _UNRESOLVED)) else head
    obj = obj.strip()
    for _ in range(4):
        trimmed = _TRAILING.sub("", obj).strip()
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
    bad = _SECOND_PERSON | _UNRESOLVED | _FIRST_SUBJECT
    if any(w in bad for w in _words(_TIME_DEICTIC.sub(" ", obj))):
        return None
    first, last = words[0], words[-1]
    if first in _WH or first in _VAGUE_START or " ".join(words[:2]) in _VAGUE_START:
        return None
    if first == "to" and (len(words) < 2 or words[1] in _COGNITIVE_INFINITIVE):
        return None
    if last in _DANGLING:
        return None
    if first in {"the", "a", "an"} and len(words) <= 4 and (words[-1] in _REACTIVE or words[1] in _REACTIVE):
        return None
    if not any(len(w) >= 3 and w not in _STOP for w in words):
        return None
    return _third_person_words(obj)


def _attr_value(attr: str, raw: str) -> str | None:
    """The value of a "my <attr> is <value>" statement when it is a crisp fact."""
    words = attr.split()
    head = words[-1]
    favourite = words[0] in {"favorite", "favourite", "fave", "fav"} and len(words) > 1
    if not favourite and head not in _ATTR_HEADS:
        return None
    if head in {"number", "id", "no", "reference"} and words[0] in _IDENT_NOUNS:
        return None  # an identifier: the identifier rule keeps it with its sentence
    if any(w in _IDENT_NOUNS for w in words) and head not in {"email", "e-mail", "address", "plan", "tier"}:
        return None
    value = _cut_clause(raw)
    dated = re.match(r"(?:on|in|at) (?=[A-Z0-9])", value)  # "my birthday is on March 3rd"
    vwords = _words(value[dated.end():] if dated else value)
    if not vwords or vwords[0] in _VALUE_BAD_START or " ".join(vwords[:2]) in _VALUE_BAD_START:
        return None
    if head in _FAMILY and vwords[0] not in {"a", "an"} and not value[:1].isupper():
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
        for match in _PREFERENCE.finditer(s):
            obj = _noun_phrase(match.group(2))
            if obj and ok(match):
                add("preference", f"The user {_third_person(match.group(1).lower())} {obj}.", [])
        for match in _FAN.finditer(s):
            obj = _noun_phrase(match.group(1))
            if obj and ok(match):
                add("preference", f"The user is a fan of {obj}.", [])
        if _GUIDELINE.search(s) and not _CONTACT.search(s):  # contact wishes are a slotted preference below
            add("guideline", f"User instruction: {s}", [])
        for pattern in (_LIVES, _LIVES_WHERE):
            for match in pattern.finditer(s):
                if ok(match):
                    add("fact", f"The user lives in {match.group(1)}.", [match.group(1)], "user.city")
        for match in _FROM.finditer(s):
            if ok(match):
                add("fact", f"The user is from {match.group(1)}.", [match.group(1)], "user.origin")
        for index, pattern in enumerate(_PET):
            for match in pattern.finditer(s):
                kind, name = (match.group(2).lower(), match.group(1)) if index == 2 else (match.group(1).lower(), match.group(2))
                kind = {"puppy": "dog", "kitten": "cat"}.get(kind, kind)
                if ok(match) and name.lower() not in _NOT_NAMES:
                    add("fact", f"The user's {kind} is called {name}.", [name], f"user.{kind}_name")
        for index, pattern in enumerate(_WORKS):
            for match in pattern.finditer(s):
                if ok(match) and (index != 1 or _JOB_CONTEXT.search(s)):
                    add("fact", f"The user works at {match.group(1)}.", [match.group(1)], "user.employer")
        for match in _WORKS_AS.finditer(s):
            job = _noun_phrase(re.split(r"\s+(?:at|for|in|with|on)\s+", match.group(1))[0], max_words=6)
            if job and ok(match):
                add("fact", f"The user works as {job}.", [], "user.job")
        for match in _I_AM_A.finditer(s):
            phrase, head = match.group(1), match.group(2).lower()
            two = " ".join(phrase.lower().split()[-2:])
            if (head in _OCCUPATIONS or two in _OCCUPATIONS) and ok(match) and not re.search(r"\b(?:bit|kind|sort|little|of|like)\b", phrase, re.I):
                add("fact", f"The user is {phrase}.", [], "user.job")
        for match in _DIET.finditer(s):
            if ok(match):
                add("fact", f"The user is {match.group(1).lower()}.", [], "user.diet")
        for match in _REPORTS.finditer(s):
            if ok(match):
                add("fact", f"The user's manager is {match.group(1)}.", [match.group(1)], "user.manager")
        for match in _ALLERGY.finditer(s):
            what = _noun_phrase(match.group(1), max_words=8)
            if what and ok(match):
                add("fact", f"The user is allergic to {what}.", [what])
        for match in _CONTACT.finditer(s):
            if ok(match):
                channel = _third_person_words(match.group(1).strip())
                prep = "at" if re.fullmatch(rf"{_EMAIL}|{_PHONE}", channel) else "on"
                add("preference", f"The user wants to be contacted {prep} {channel}.", [channel], "user.contact_channel")
        for match in _MEETING.finditer(s):
            if _OTHERS.search(match.group(0)) or not ok(match):
                continue  # someone else's meeting ("the sync at their company")
            kind, day = match.group(1).lower(), match.group(2).capitalize()
            add("fact", f"The user's recurring {kind} is on {day}.", [day], f"user.{kind}_day")
        for match in _MY_ATTR.finditer(s):
            attr = match.group(1).strip().lower()
            before = s[: match.start()]
            if not (not before.strip() or re.search(r"[,:;–—-]\s*$", before) or set(_words(before)) <= _INTERJECTIONS):
                continue  # "the reason my code is slow is …": "my" is not the subject
            if attr in _ATTR_SKIP or attr.split()[-1] in _ATTR_SKIP or _MEETING.search(match.group(0)) or not ok(match):
                continue
            value = _attr_value(attr, match.group(2))
            if value:
                favourite = attr.split()[0] in {"favorite", "favourite", "fave", "fav"}
                add("preference" if favourite else "fact", f"The user's {attr} is {value}.", [value], f"user.{attr.replace(' ', '_')}")
        for match in _ACTIVITY.finditer(s):
            verb = match.group(1).lower()
            if verb == "moving" and not _MOVING_OBJECT.match(match.group(2)):
                continue
            if verb == "writing" and match.group(2).lower().startswith("to "):
                continue  # "I'm writing to complain …"
            obj = _noun_phrase(match.group(2))
            if obj and ok(match):
                add("memory", f"The user is {verb} {obj}.", [])
        for match in _FAILING.finditer(s):
            add("fact", f"The {match.group(1).lower()} {match.group(2).lower()} is {match.group(3).strip()}.", [match.group(3).strip()],
                f"problem.{match.group(1).lower()}_{match.group(2).lower()}")

    def _scan_names(self, s: str, add: Add) -> None:
        for pattern, kind in _NAME_PATTERNS:
            for match in pattern.finditer(s):
                name = match.group(1)
                low = name.lower()
                if low in _NOT_NAMES or not _asserted(s, match.start()):
                    continue
                if kind != "name" and (not name[0].isupper() or low in _NOT_NAME_WORDS):
                    continue  # "call me anytime", "I'm Canadian"
                if kind == "intro" and not _NAME_FOLLOW.match(s[match.end():]):
                    continue  # "I'm Going to …": a capitalised word, not a name
                name = name[0].upper() + name[1:]
                if kind == "call":
                    add("preference", f"The user wants to be called {name}.", [name], "user.preferred_name")
                else:
                    add("fact", f"The user's name is {name}.", [name], "user.name")

    def _scan_identifiers(self, text: str, add: Add) -> None:
        for match in [*_IDENT.finditer(text), *_IDENT_IS.finditer(text)]:
            ident = f"{match.group(1).lower()} {match.group(2)}"
            sentence = _sentence_with(text, match.start())
            after = text[text.find(sentence) + len(sentence):].strip()
            follow = _SENTENCE.match(after)
            if follow and follow.group(0).strip():
                sentence = f"{sentence} {follow.group(0).strip()}"
            add("fact", f"User reported ({ident}): {sentence}" if _PROBLEM.search(sentence) else f"User mentioned {ident}: {sentence}", [ident])


def _third_person(verb: str) -> str:
    return {
        "prefer": "prefers", "like": "likes", "love": "loves", "adore": "adores", "enjoy": "enjoys", "hate": "hates",
        "dislike": "dislikes", "don't like": "does not like", "do not like": "does not like",
        "don't enjoy": "does not enjoy", "can't stand": "cannot stand", "cannot stand": "cannot stand",
    }.get(verb, verb)
