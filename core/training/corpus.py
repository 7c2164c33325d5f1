"""Build the bilingual (English + Chinese) training corpus from Debian packages.

Nothing third-party is committed: each package is fetched at build time with
``apt-get download`` and unpacked with ``dpkg-deb -x`` into a temporary folder
(nothing is installed). Each source has an extractor that yields plain-text
documents; they are cleaned (ANSI escapes, markup, ASCII art, mojibake),
deduplicated, balanced between the languages, and split into train/validation
by a hash of their text, so the same packages always give the same files.

Output folder:
    train.txt, val.txt   documents separated by one blank line ("\\n\\n")
    manifest.json        per source: package, version, licence, documents, characters
"""
from __future__ import annotations

import hashlib
import html
import json
import re
import struct
import subprocess
import tempfile
import unicodedata
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable, Iterator

DOC_SEPARATOR = "\n\n"
VAL_PER_MILLE = 20  # 2% of documents go to validation

# ---------------------------------------------------------------- cleaning

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RE = re.compile(f"[{_CJK}]")
_CJK_WRAP_RE = re.compile(f"(?<=[{_CJK}，。、；：？！“”（）《》])\\s*\\n\\s*(?=[{_CJK}，。、；：？！“”（）《》])")
_MOJIBAKE_RE = re.compile("\ufffd|Ã.|â€|[\x80-\x9f]")
_BOX_RE = re.compile("[\u2500-\u257f]")
_WORDY = re.compile(r"[\w，。、；：？！“”‘’（）《》'\".,;:?!()\-]")


def is_cjk(ch: str) -> bool:
    return bool(_CJK_RE.match(ch))


def strip_ansi(text: str) -> str:
    return _ANSI_RE.sub("", text)


def repair_cjk_wraps(text: str) -> str:
    """Join hard-wrapped Chinese lines: a newline between two CJK characters is a line wrap, not a break."""
    return _CJK_WRAP_RE.sub("", text)


def is_art_line(line: str) -> bool:
    """A line that is drawing rather than text: box characters, or mostly symbols."""
    chars = [c for c in line if not c.isspace()]
    if not chars:
        return False
    if _BOX_RE.search(line):
        return True
    wordy = sum(1 for c in chars if _WORDY.match(c))
    return wordy / len(chars) < 0.7 or re.search(r"([^\w\s])\1{3,}", line) is not None


def clean_document(text: str) -> str | None:
    """Normalise one document; None when what is left is not usable prose."""
    text = unicodedata.normalize("NFC", strip_ansi(text)).replace("\xa0", " ").replace("\t", " ")
    if _MOJIBAKE_RE.search(text):
        return None  # an encoding accident somewhere upstream: drop the whole document
    lines = [ln.strip() for ln in text.splitlines()]
    prose = [re.sub(r" {2,}", " ", ln) for ln in lines if ln and not is_art_line(ln)]
    if sum(map(len, prose)) < 0.5 * sum(map(len, lines)):
        return None  # mostly a picture or a table; a few drawn lines inside prose are just dropped
    text = "\n".join(prose)  # no blank lines inside: a blank line separates documents
    return text if len(text) >= 8 else None


def dedup_key(text: str) -> str:
    return hashlib.sha1(re.sub(r"\W+", "", text).lower().encode("utf-8")).hexdigest()


def is_validation(key: str) -> bool:
    return int(key[:8], 16) % 1000 < VAL_PER_MILLE


def cjk_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(map(is_cjk, letters)) / len(letters) if letters else 0.0


# ---------------------------------------------------------------- extractors

def fortune_entries(path: Path) -> Iterator[str]:
    """A fortune file is entries separated by lines holding only '%'."""
    raw = path.read_bytes().decode("utf-8", errors="replace")
    yield from re.split(r"\n%\n", raw)


# English fortune files left out: ascii-art (pictures); pratchett, startrek, songs-poems
# (long quotations of recent copyrighted works); the offensive set lives in another package.
FORTUNES_SKIP = {"ascii-art", "pratchett", "startrek", "songs-poems", "translate-me"}


def extract_fortunes(root: Path) -> Iterator[str]:
    folder = root / "usr/share/games/fortunes"
    for path in sorted(folder.iterdir()):
        if path.suffix in (".dat", ".u8") or path.is_symlink() or path.name in FORTUNES_SKIP:
            continue
        yield from fortune_entries(path)


def extract_fortunes_zh(root: Path) -> Iterator[str]:
    # The Debian reference excerpts in "chinese" are hard-wrapped at 70 columns: join those lines.
    for name in ("chinese", "tang300", "song100"):
        for entry in fortune_entries(root / "usr/share/games/fortunes" / name):
            lines = [ln.strip() for ln in strip_ansi(entry).replace("\xa0", " ").splitlines()]
            yield repair_cjk_wraps("\n".join(lines))


class _HelpText(HTMLParser):
    """Collect the text of paragraph-like elements of a LibreOffice help page."""
    BLOCKS = {"p", "h1", "h2", "h3", "h4", "li", "td"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._depth = 0
        self._buf: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in self.BLOCKS:
            self._flush()
            self._depth += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag in self.BLOCKS:
            self._flush()
            self._depth = max(0, self._depth - 1)

    def handle_data(self, data):
        if self._depth and not self._skip:
            self._buf.append(data)

    def _flush(self):
        text = re.sub(r"\s+", " ", "".join(self._buf)).strip()
        self._buf = []
        if text:
            self.paragraphs.append(text)


def extract_libreoffice_help(root: Path) -> Iterator[str]:
    """One document per help page: its paragraphs that contain Chinese, each once."""
    seen: set[str] = set()
    for path in sorted((root / "usr/share/libreoffice/help").rglob("*.html")):
        parser = _HelpText()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        keep = []
        for para in parser.paragraphs:
            if len(para) < 6 or cjk_share(para) < 0.5 or para in seen:
                continue
            seen.add(para)
            keep.append(html.unescape(para))
        if keep:
            yield "\n".join(keep)


# SWORD zText: .bzs = blocks (offset, size, uncompressed size: 3 x uint32 LE), each a zlib
# stream; .bzv = verses (block, offset in block: uint32, size: uint16).
_OSIS_NOTE_RE = re.compile(r"<note\b.*?</note>", re.S)
_TAG_RE = re.compile(r"<[^>]+>")


def read_ztext(folder: Path, testament: str) -> Iterator[str]:
    blocks_raw = (folder / f"{testament}.bzs").read_bytes()
    data = (folder / f"{testament}.bzz").read_bytes()
    blocks = [struct.unpack_from("<III", blocks_raw, i) for i in range(0, len(blocks_raw) - 11, 12)]
    cache: dict[int, bytes] = {}
    verses = (folder / f"{testament}.bzv").read_bytes()
    for i in range(0, len(verses) - 9, 10):
        block, offset, size = struct.unpack_from("<IIH", verses, i)
        if size == 0 or block >= len(blocks):
            continue
        if block not in cache:
            start, length, _ = blocks[block]
            cache = {block: zlib.decompress(data[start:start + length])}  # verses come in block order
        raw = cache[block][offset:offset + size].decode("utf-8", errors="replace")
        yield raw


def osis_to_text(raw: str) -> str:
    """Drop footnotes and tags; keep the words."""
    text = _TAG_RE.sub("", _OSIS_NOTE_RE.sub("", raw))
    return re.sub(r"\s+", " ", html.unescape(text)).strip()


def extract_sword(root: Path) -> Iterator[str]:
    """One document per chapter-sized run of verses (about 20 verses)."""
    for folder in sorted((root / "usr/share/sword/modules/texts/ztext").iterdir()):
        for testament in ("ot", "nt"):
            if not (folder / f"{testament}.bzs").exists():
                continue
            chunk: list[str] = []
            for raw in read_ztext(folder, testament):
                verse = osis_to_text(raw)
                if verse:
                    chunk.append(verse)
                if len(chunk) >= 20:
                    yield " ".join(chunk)
                    chunk = []
            if chunk:
                yield " ".join(chunk)


def extract_wordnet(root: Path) -> Iterator[str]:
    """'word: gloss; "example"' for every synset."""
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (root / "usr/share/wordnet" / f"data.{pos}").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue  # licence header
            head, gloss = line.split("|", 1)
            fields = head.split()
            words = [fields[4 + 2 * i].replace("_", " ") for i in range(min(int(fields[3], 16), 3))]
            words = [re.sub(r"\(.*?\)$", "", w) for w in words]
            yield f"{', '.join(words)}: {gloss.strip()}"


# ---------------------------------------------------------------- sources

@dataclass(frozen=True)
class Source:
    package: str
    language: str            # "en" or "zh"
    licence: str             # as the package's copyright file states it
    extract: Callable[[Path], Iterator[str]]
    max_chars: int           # cap after cleaning, to balance the languages
    note: str = ""


SOURCES = (
    Source("sword-text-web", "en", "public domain (World English Bible; \"WEB\" is a trademark: modified text must not be called WEB)",
           extract_sword, 2_000_000, "modern English Bible translation, cut into ~20-verse documents"),
    Source("fortunes", "en", "BSD (fortune program; quotations of mixed origin)", extract_fortunes, 2_500_000,
           "left out: ascii-art, pratchett, startrek, songs-poems, translate-me"),
    Source("fortunes-min", "en", "BSD (fortune program; quotations of mixed origin)", extract_fortunes, 1_000_000),
    Source("wordnet-base", "en", "WordNet 3.0 licence (permissive; Copyright 2006 by Princeton University, notice kept)",
           extract_wordnet, 1_200_000, "word: gloss; \"examples\" per synset, a sample"),
    Source("fortunes-zh", "zh", "GPL-3.0+", extract_fortunes_zh, 3_000_000,
           "Chinese quotations, Tang and Song poems, Debian code of conduct/reference excerpts"),
    Source("libreoffice-help-zh-cn", "zh", "MPL-2.0 (some Apache-2.0 material)", extract_libreoffice_help, 3_000_000,
           "paragraphs of the Simplified Chinese help pages, HTML stripped, each paragraph once"),
)


def fetch_package(package: str, workdir: Path) -> tuple[Path, str]:
    """apt-get download + dpkg-deb -x into workdir/package; returns (root, version). Nothing is installed."""
    debs = workdir / "debs"
    debs.mkdir(exist_ok=True)
    existing = sorted(debs.glob(f"{package}_*.deb"))
    if not existing:
        subprocess.run(["apt-get", "download", package], cwd=debs, check=True, capture_output=True)
        existing = sorted(debs.glob(f"{package}_*.deb"))
    deb = existing[-1]
    root = workdir / package
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True,
                             text=True).stdout.strip()
    return root, version


def _sample_to_cap(docs: list[tuple[str, str]], max_chars: int) -> list[tuple[str, str]]:
    """Keep documents in hash order until max_chars: a deterministic, evenly spread sample."""
    out, total = [], 0
    for key, doc in sorted(docs):
        if total >= max_chars:
            break
        out.append((key, doc))
        total += len(doc)
    return out


def build_corpus(out: str | Path, workdir: str | Path | None = None, log=print) -> dict:
    """Fetch, extract, clean, deduplicate, balance and split; write train.txt, val.txt, manifest.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="glassbox-corpus-") as tmp:
        work = Path(workdir) if workdir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        seen: set[str] = set()
        train: list[tuple[str, str]] = []
        val: list[tuple[str, str]] = []
        manifest = {"sources": [], "val_per_mille": VAL_PER_MILLE}
        for src in SOURCES:
            root, version = fetch_package(src.package, work)
            copyright_file = root / "usr/share/doc" / src.package / "copyright"
            docs: list[tuple[str, str]] = []
            raw_count = 0
            for raw in src.extract(root):
                raw_count += 1
                doc = clean_document(raw)
                if doc is None:
                    continue
                if (src.language == "zh") != (cjk_share(doc) > 0.3):
                    continue  # an English entry in a Chinese package or the reverse
                key = dedup_key(doc)
                if key in seen:
                    continue
                seen.add(key)
                docs.append((key, doc))
            kept = _sample_to_cap(docs, src.max_chars)
            kept.sort(key=lambda kd: kd[0])
            n_val = 0
            for key, doc in kept:
                (val if is_validation(key) else train).append((key, doc))
                n_val += is_validation(key)
            chars = sum(len(d) for _, d in kept)
            manifest["sources"].append(dict(
                package=src.package, version=version, language=src.language, licence=src.licence,
                copyright_file_found=copyright_file.is_file(), note=src.note, raw_entries=raw_count,
                unique_documents=len(docs), kept_documents=len(kept), validation_documents=n_val,
                characters=chars, utf8_bytes=sum(len(d.encode()) for _, d in kept)))
            log(f"{src.package:24s} {version:22s} {len(kept):6d} docs  {chars / 1e6:5.2f} M chars  ({src.language})")
    # Hash order interleaves the sources, so any prefix of a file is a fair sample of all of them.
    (out / "train.txt").write_text(DOC_SEPARATOR.join(d for _, d in sorted(train)) + "\n", encoding="utf-8")
    (out / "val.txt").write_text(DOC_SEPARATOR.join(d for _, d in sorted(val)) + "\n", encoding="utf-8")
    manifest["train_documents"], manifest["val_documents"] = len(train), len(val)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


# ---------------------------------------------------------------- reading

def read_documents(path: str | Path) -> list[str]:
    """Documents of a text file: paragraphs separated by blank lines."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    return [d.strip() for d in re.split(r"\n\s*\n", text) if d.strip()]


def load_corpus(path: str | Path) -> tuple[list[str], list[str], dict]:
    """(train docs, val docs, manifest) from a corpus folder, or from any one text file (split by hash)."""
    path = Path(path)
    if path.is_dir():
        manifest_path = path / "manifest.json"
        manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
        return read_documents(path / "train.txt"), read_documents(path / "val.txt"), manifest
    docs = read_documents(path)
    train = [d for d in docs if not is_validation(dedup_key(d))]
    val = [d for d in docs if is_validation(dedup_key(d))]
    if not val and len(train) > 1:
        val = [train.pop()]  # a tiny file still needs something to validate on
    return train, val, {"sources": [{"package": path.name, "language": "?", "licence": "supplied by the user"}]}
