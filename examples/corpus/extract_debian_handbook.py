# Extracts prose paragraphs from The Debian Administrator's Handbook (Debian package
# debian-handbook; GPL-2+ or CC-BY-SA-3.0) into BERT pre-training text: one sentence per line,
# a blank line between documents (one per HTML page). See SOURCE.md for how it was run.
# usage: extract_debian_handbook.py HTML_DIR OUT.txt MAX_BYTES
import html.parser, re, sys, os
src = sys.argv[1]; out = sys.argv[2]; limit = int(sys.argv[3])
order = re.findall(r'href="([^"#]*\.html)', open(os.path.join(src, "index.html"), encoding="utf-8").read())
seen = []
for f in order:
    if f != "index.html" and f not in seen: seen.append(f)

class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.depth = 0; self.buf = []; self.paras = []; self.bad = 0; self.stack = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div":
            if self.depth: self.depth += 1
            elif a.get("class") == "para": self.depth = 1; self.buf = []; self.bad = 0
        if self.depth and tag in ("pre", "table", "ul", "ol"): self.bad += 1
    def handle_endtag(self, tag):
        if tag == "div" and self.depth:
            self.depth -= 1
            if self.depth == 0 and not self.bad: self.paras.append("".join(self.buf))
    def handle_data(self, d):
        if self.depth: self.buf.append(d)

total = 0; docs = []
for f in seen:
    p = P(); p.feed(open(os.path.join(src, f), encoding="utf-8").read())
    sents = []
    for para in p.paras:
        t = re.sub(r"\s+", " ", para).strip()
        if len(t.split()) < 6: continue
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"(])", t):
            if len(s.split()) >= 3: sents.append(s)
    if len(sents) < 3: continue
    doc = "\n".join(sents) + "\n"
    if total + len(doc.encode()) > limit: break
    docs.append(doc); total += len(doc.encode()) + 1
open(out, "w", encoding="utf-8").write("\n".join(docs))
print(len(docs), "documents,", total, "bytes, last:", f)
