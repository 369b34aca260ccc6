"""Compare two cardcmp.py / turncmp.py dumps, leaving out the ContextCard fields 0685e9d added
(is_transcript, note, transcript_tokens; another change, between old and new). Usage: cmpstrip.py OLD.json NEW.json"""
import json, sys
NEW = {"is_transcript", "note", "transcript_tokens"}
def strip(x):
    if isinstance(x, dict): return {k: strip(v) for k, v in x.items() if k not in NEW}
    if isinstance(x, list): return [strip(v) for v in x]
    return x
a = strip(json.load(open(sys.argv[1]))); b = strip(json.load(open(sys.argv[2])))
diff = [k for k in a if a[k] != b.get(k)]
print(len(a), len(b), "entries;", len(diff), "differ beyond the fields 0685e9d added", diff[:3])
