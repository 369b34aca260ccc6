"""The rule-based extractor's vocabulary: word lists and compiled patterns (see ``rules`` for
how they are applied). Kept apart so the extractor reads as its logic."""

from __future__ import annotations

import re

# ---- word lists ---------------------------------------------------------------------------------
NOT_NAMES = {
    "a", "an", "the", "not", "so", "sorry", "fine", "good", "here", "just", "also", "still", "back",
    "happy", "glad", "sure", "ok", "okay", "afraid", "looking", "trying", "working", "migrating",
    "going", "having", "new", "done", "ready", "interested", "using", "building", "currently",
    "at", "on", "in", "when", "whenever", "anytime", "later", "tomorrow", "tonight", "now",
    "soon", "if", "after", "before", "maybe", "crazy", "old", "out", "home", "there", "from",
}
NOT_NAME_WORDS = {  # capitalised words after "I'm" that describe, not name, the speaker
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
SECOND_PERSON = {"you", "your", "yours", "yourself", "yourselves", "you're", "you've", "you'll", "you'd", "u", "ur", "y'all", "ya", "youre"}
UNRESOLVED = {  # pronouns and demonstratives whose referent is outside the sentence
    "it", "its", "it's", "this", "that", "these", "those", "he", "she", "him", "her", "his", "hers",
    "they", "them", "their", "theirs", "one", "ones", "both", "either", "neither", "such", "there",
    "here", "same", "stuff", "he's", "she's", "they're", "that's", "thats", "this's",
}
FIRST_SUBJECT = {"i", "i'm", "i've", "i'd", "i'll", "im", "ive", "we", "we're", "we've", "we'd", "we'll"}
FIRST_TO_THIRD = {
    "me": "them", "my": "their", "mine": "theirs", "myself": "themselves", "our": "their",
    "us": "them", "ours": "theirs", "ourselves": "themselves",
}
WH = {"what", "how", "when", "where", "why", "who", "whom", "whose", "which", "whether", "if", "whatever", "wherever", "whenever", "because", "so", "than", "like", "as"}
VAGUE_START = {
    "something", "anything", "everything", "nothing", "stuff", "things", "lots", "more", "most", "all",
    "some", "any", "many", "much", "so", "too", "very", "a lot", "less", "only", "just", "such", "other", "others",
    "not", "no",
}
DANGLING = {  # an object ending on one of these was cut off mid-phrase
    "a", "an", "the", "some", "any", "few", "several", "many", "much", "more", "all", "every", "each",
    "no", "of", "to", "for", "with", "in", "on", "at", "by", "from", "about", "into", "onto", "and",
    "or", "but", "than", "as", "their", "very", "really", "so", "too", "just", "like", "such", "lot",
    "bit", "couple", "kind", "sort", "quite", "rather", "this", "that", "my", "our", "is", "are",
    "was", "were", "be", "been", "not", "your", "it", "if", "when", "because", "other", "another",
}
REACTIVE = {  # "the <noun>" refers to something just shown or said ("I love the colors!")
    "idea", "ideas", "sound", "look", "looks", "vibe", "vibes", "energy", "color", "colors", "colour",
    "colours", "photo", "photos", "picture", "pictures", "pic", "pics", "shot", "shots", "view", "design",
    "details", "detail", "result", "results", "name", "style", "approach", "way", "plan", "update",
    "suggestion", "suggestions", "answer", "thought", "sentiment", "concept", "one", "ones", "version",
    "solution", "option", "options", "choice", "painting", "drawing", "video", "song", "post", "message",
    "story", "outfit", "dress", "setup", "feature", "change", "changes", "new", "first", "second", "last",
}
STOP = {
    "a", "an", "the", "to", "of", "in", "on", "at", "for", "with", "and", "or", "is", "be", "my", "their",
    "them", "very", "really", "so", "too", "just", "some", "any", "get", "go", "do", "make",
}
COGNITIVE_INFINITIVE = {
    "think", "say", "know", "believe", "imagine", "hear", "see", "help", "admit", "tell", "ask", "point",
    "mention", "add", "chat", "talk", "be", "hope", "pretend", "guess", "complain", "report", "inform",
    "let", "follow", "check", "confirm", "share", "update", "remind", "apologize", "apologise", "thank",
}
TRAILING = re.compile(
    r"(?:\s+(?:a lot|so much|very much|too|as well|anyway|anyways|though|tbh|honestly|lol|haha\w*|"
    r"really|a ton|again|lately|now|right now|already|also|either|instead|best|most|at all|i guess|for sure|"
    r"these days|nowadays))+$",
    re.I,
)
# a clause boundary inside an object: what follows is not part of the thing liked / worked on
CUT = re.compile(
    r"\s*(?:[;:()\"]|\s[-–—]\s|\b(?:but|because|cause|cuz|bc|since|though|although|so|when|whenever|while|"
    r"which|who|unless|if|until|whereas|lol|haha\w*|lmao|tbh|and (?:i|i'm|i've|it|it's|that|we|he|she|they|you|"
    r"my|the)|plus|especially|except|even)\b)",
    re.I,
)
LIST_TAIL = re.compile(r"^(?:\s*[\w'@.+-]+(?: [\w'@.+-]+){0,3},)*\s*(?:and|or) [\w'@.+-]+(?: [\w'@.+-]+){0,3}\s*$", re.I)

# ---- sentence frames ---------------------------------------------------------------------------
# words before the match (in its clause) that make the statement hypothetical, reported, hedged
# or negated
HEDGE_BEFORE = re.compile(
    r"\b(?:if|unless|whether|maybe|perhaps|might|would|could|should|wish|hope|hoping|suppose|supposing|"
    r"imagine|pretend|said|says|say|told|tells|tell|think|thinks|thought|guess|asked|asks|wonder\w*|"
    r"not|never|don't|doesn't|didn't|dont|dunno|doubt|pretending|wants?|wanted|claims?|claimed|"
    r"heard|hears|apparently|supposedly|used|once|whenever|when)\b|'d\b",
    re.I,
)
HEDGE_ANYWHERE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i suppose|i believe|not sure|i doubt|"
    r"kind of|sort of|kinda|sorta|i wonder|apparently|supposedly|in theory|hypothetically|pretend|jk|just kidding)\b",
    re.I,
)
CLAUSE_BREAK = re.compile(r"[,;:–—]|\b(?:but|and|so|then|anyway|also)\b", re.I)
INTERJECTIONS = {
    "oh", "and", "also", "btw", "actually", "well", "so", "ok", "okay", "yeah", "yes", "no", "hi",
    "hey", "hello", "fyi", "update", "plus", "now", "but", "by", "the", "way", "ps", "honestly",
    "anyway", "sorry", "just", "reminder", "note", "heads", "up", "funny", "enough", "fun", "fact",
}

# ---- patterns -----------------------------------------------------------------------------------
NAME = r"([A-Za-z][\w'-]{1,30})"
NAME_PATTERNS = [
    (re.compile(rf"\b(?i:my name is|my name's) {NAME}"), "name"),
    (re.compile(rf"\b(?i:call me|you can call me|please call me) {NAME}"), "call"),
    (re.compile(rf"(?:^|[.!?,]\s*|\b(?i:hi|hello|hey)[,!]?\s+)(?i:i'm|i am) {NAME}\b"), "intro"),
    (re.compile(rf"\b(?i:hi|hello|hey)[,!]?\s+(?i:this is|it's) {NAME}\b"), "intro"),
    (re.compile(rf"(?:^|[.!?,]\s*)(?i:this is) {NAME}(?= (?i:from|speaking|here)\b)"), "intro"),
]
NAME_FOLLOW = re.compile(r"\s*(?:$|[,.!;:)]|and\b|from\b|here\b|by\b|speaking\b|btw\b|-)", re.I)
ADVERBS = r"(?: (?:really|strongly|usually|always|absolutely|just|also|totally|genuinely|honestly|still|definitely|generally|actually|truly|kinda|much))*"
PREFERENCE = re.compile(
    rf"\b(?:I|i){ADVERBS} (prefer|like|love|adore|enjoy|hate|dislike|don't like|do not like|don't enjoy|can't stand|cannot stand)\s+(.{{3,200}})",
)
FAN = re.compile(rf"\b(?:I'm|I am|i'm|im){ADVERBS} (?:a )?(?:huge |big |massive |real )?fan of (.{{3,160}})")
GUIDELINE_VERBS = (
    "answer|reply|respond|write|use|include|add|give|show|explain|format|keep|put|start|begin|end|mention|"
    "ask|check|double-check|confirm|cite|call|refer|address|speak|talk|suggest|recommend|avoid|assume|send|cc|"
    "remind|tell|list|sort|make|stick|treat|translate|summarize|summarise|provide|skip|omit|wrap|return|"
    "prefix|number|label|highlight|test|run|commit|push|be|do|don't|do not|stop|consider|let|message|contact|"
    "email|text|ping|notify|offer|quote|link|comment|document|spell|round|convert|default|stay|write|reply|"
    "greet|sign|close|open|show|limit|favor|favour|prioritize|prioritise|go|try|leave|put|respect"
)
GUIDELINE = re.compile(  # a standing instruction opens its sentence ("Always …", "Please never …") with an imperative
    rf"(?:^|[.!?:]\s+|\bplease\s+)(?:from now on|going forward|in (?:the )?future|always|never)\b[, ]*(?:please[, ]+)?"
    rf"(?:{GUIDELINE_VERBS})\b",
    re.I | re.M,
)
MY_ATTR = re.compile(r"\b(?i:my) ([a-z][a-z'-]*(?: [a-z][a-z'-]*){0,2}) (?:is|are) (.{1,160})")
ATTR_HEADS = {
    "birthday", "email", "e-mail", "address", "hometown", "timezone", "zone", "editor", "ide", "os", "stack",
    "language", "languages", "laptop", "computer", "phone", "car", "major", "degree", "nationality",
    "username", "handle", "budget", "deadline", "goal", "role", "title", "position", "shift", "schedule",
    "number", "wife", "husband", "partner", "boyfriend", "girlfriend", "son", "daughter", "brother",
    "sister", "mom", "mum", "dad", "mother", "father", "fiance", "fiancé", "fiancee", "hobby", "hobbies",
    "diet", "specialty", "field", "school", "university", "college", "team", "department", "size",
    "blood", "age", "gender", "pronouns", "surname", "nickname", "sign", "website", "github", "browser",
    "distro", "shell", "setup", "plan", "tier", "hours",
}
FAMILY = {
    "wife", "husband", "partner", "boyfriend", "girlfriend", "son", "daughter", "brother", "sister",
    "mom", "mum", "dad", "mother", "father", "fiance", "fiancé", "fiancee",
}
IDENT_NOUNS = {"order", "invoice", "ticket", "case", "account", "booking", "reservation", "shipment", "contract", "claim"}
ATTR_SKIP = {"name", "dog", "cat", "pet", "manager", "boss", "employer", "company"}
VALUE_BAD_START = {
    "so", "very", "really", "too", "pretty", "quite", "super", "kind", "sort", "not", "still", "always",
    "never", "just", "getting", "going", "broken", "down", "great", "awesome", "terrible", "bad", "good",
    "fine", "ok", "okay", "important", "busy", "full", "done", "over", "gone", "late", "due", "coming",
    "almost", "about", "like", "more", "less", "visiting", "sick", "away", "out", "off", "on", "in",
    "back", "home", "here", "there", "all", "that", "what", "how", "a bit", "kinda", "sorta", "probably",
    "currently", "being", "having", "making", "driving", "killing", "amazing", "annoying", "crazy",
    "huge", "tiny", "weird", "strange", "hard", "easy", "nice", "cool", "lovely", "fun", "boring",
    "stressful", "tough", "rough", "tight", "perfect", "the same", "same", "different", "nothing",
}
ACTIVITY = re.compile(
    r"\b(?:I|i)(?:'m| am|'ve been| have been|m| currently am|'m currently|'m still|'m now) "
    r"(migrating|working on|building|debugging|planning|moving|setting up|writing|learning|preparing|studying|"
    r"training for|volunteering at|renovating|refactoring|organizing|organising|practicing|practising|"
    r"saving up for|saving for|redesigning|rewriting|developing|designing)\s+(.{3,200})",
)
MOVING_OBJECT = re.compile(r"^(?:to|into|back to|abroad|house|home|out of|in with|across)\b", re.I)
IDENT = re.compile(
    r"\b(order|invoice|ticket|case|account|booking|reservation|shipment|contract|claim)\s*(?:#|no\.?|number|id|ref\.?|reference)?\s*([A-Z]{0,5}-?\d[\w-]{2,})",
    re.I,
)
PROPER = r"([A-Z][\w&'-]*(?: (?!I\b|I'|I’)(?:[A-Z][\w&'-]*|de|del|am|on|upon))*)"
LIVES = re.compile(rf"\b(?:I|[Ww]e)(?:'ve| have)? (?:now )?(?:live|lives|living|relocated|moved) (?:in|to) {PROPER}")
WORKS = [
    re.compile(rf"\bI (?:now )?(?:work|am working|'m working) (?:at|for) {PROPER}"),
    re.compile(rf"\bI(?:'m| am) (?:now )?at {PROPER} now\b"),
    re.compile(rf"\b[Mm]y (?:new )?(?:employer|company) is {PROPER}"),
]
JOB_CONTEXT = re.compile(r"\b(?:job|jobs|work|working|worked|switched|joined|hired|employer|role|position|company|started)\b", re.I)
WORKS_AS = re.compile(r"\bI (?:now )?(?:work|am working|'m working) as (an? [^.!?\n,;]{2,80})")
OCCUPATIONS = {
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
I_AM_A = re.compile(r"\b(?:I'm|I am|i'm|im) (an? (?:[\w-]+ ){0,3}?([\w-]+))(?=\s*(?:$|[,.!;:]|and\b|by\b|at\b|for\b|in\b|with\b|who\b|so\b|but\b|now\b))")
DIET = re.compile(r"\b(?:I'm|I am|i'm|im) (?:a )?(vegetarian|vegan|pescatarian|lactose intolerant|gluten intolerant|celiac|coeliac|diabetic|teetotal)\b")
FROM = re.compile(rf"\b(?:I'm|I am|i'm) (?:originally )?from {PROPER}")
LIVES_WHERE = re.compile(rf"\bin {PROPER},? (?:it's |that's |which is )?where (?:I|we) live")
PET = [
    re.compile(rf"\b[Mm]y (dog|cat|pet)(?:'s name)? is (?:called |named )?{PROPER}"),
    re.compile(rf"\b[Mm]y (dog|cat|pet)\b[^.!?\n]{{0,40}}?\b(?:named|called) {PROPER}"),
    re.compile(rf"{PROPER}, my (dog|cat)\b"),
    re.compile(rf"\b(?:I|[Ww]e)(?: just| recently)? (?:have|adopted|got|rescued) an? (?:[\w-]+ ){{0,3}}?(dog|cat|puppy|kitten)\b[^.!?\n]{{0,30}}?\b(?:named|called) {PROPER}"),
]
REPORTS = re.compile(rf"\b(?:I report to|[Mm]y (?:new )?(?:manager|boss) is) {PROPER}")
ALLERGY = re.compile(r"\bI(?:'m| am)(?: very| severely| seriously| mildly)? allergic to ([^.!?\n,;]{2,60})", re.I)
CHANNELS = (
    r"(?:(?:my |our )?(?:work |personal |private )?(?:e-?mail|cell|mobile|phone|landline))|Signal|Telegram|WhatsApp|Slack|"
    r"(?:Microsoft )?Teams|Discord|Matrix|SMS|iMessage|WeChat|Messenger|LinkedIn|Skype|Viber|Threema|Zoom"
)
EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
PHONE = r"\+?\d[\d\s().-]{6,}\d"
CONTACT = re.compile(
    rf"\b(?i:message|contact|reach|text|ping|email|e-mail|call|dm|write) (?i:me) (?i:on|at|via|by|through|over|using) "
    rf"({EMAIL}|{PHONE}|(?i:{CHANNELS}))(?!\w)",
)
MEETING = re.compile(
    r"\b(?:my|our|the)(?: weekly| team| daily| monthly)? (sync|meeting|standup|stand-up|one-on-one|1:1)\b[^.!?\n]{0,40}?"
    r"\b(?:is on|is every|is now on|moved to|happens on|every|on) ((?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?)",
    re.I,
)
OTHERS = re.compile(r"\b(?:their|his|her|your)\b", re.I)
IDENT_IS = re.compile(
    r"\b(order|invoice|ticket|case|account|booking|reservation|shipment|contract|claim)\b[^.!?\n]{0,60}?\b(?:is|number|no\.?|id|#)\s*:?\s*([A-Z]{0,5}-?\d[\w-]{2,})",
    re.I,
)
PROBLEM = re.compile(r"\b(fail\w*|error\w*|broken|crash\w*|damaged|missing|late|wrong|refund|return|bug|crack\w*|charged)\b", re.I)
FAILING = re.compile(r"\b(?:the )?(failing|broken) (step|part|job|stage|test) (?:right now |currently )?is ([^.!?\n,;]{3,160})", re.I)
# a sentence ends at . ! ? or a line break; dots inside words (emails, versions, "e.g") do not end it
SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=[\w@/-]))+[.!?]*")
TIME_DEICTIC = re.compile(  # "this summer", "next week": a time, not an unresolved "this"
    r"\b(?:this|that|next|last|these|those) (?:morning|afternoon|evening|night|week|weekend|month|year|summer|winter|"
    r"spring|fall|autumn|semester|term|quarter|season|time|days|weeks|months|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b",
    re.I,
)
WORD = re.compile(r"[\w'’@.+/-]+")
