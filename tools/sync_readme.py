"""Write README.md from nbs/index.ipynb without Quarto (which cannot be installed here).

`python tools/sync_readme.py` rewrites README.md; `--check` exits 1 if README.md is out of step, or if one of
its links leads nowhere: a file of the repository that is not there, or a page (or a `#fragment` of one) that the
docs site does not have.
Markdown cells are copied, code cells become ```python blocks; cells marked `#| hide` are left out and `#|`
directives are dropped, as nbdev's own README rendering does. The README is also the package's description on
PyPI, where the repository's files are not at hand: links between pages (`10_accumulate.ipynb#section`, right
from the docs site) become links to the published docs site (`https://fastaccum.github.io/fastaccum/accumulate.html#section`),
and images of the repository (`../docs/images/demo_loss.png`, relative to nbs/) absolute links to the file on GitHub
(`https://raw.githubusercontent.com/fastaccum/fastaccum/main/docs/images/demo_loss.png`), which PyPI shows. A code
cell's `#| readme_image: PATH` puts that image (what the cell shows when it runs) after its code, in the README only.
"""
import json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
SITE_URL = 'https://fastaccum.github.io/fastaccum/'
RAW_URL = 'https://raw.githubusercontent.com/fastaccum/fastaccum/main/'

def page_name(nb_name):
    "The page nbdev and Quarto make of a notebook: `10_accumulate.ipynb` -> `accumulate.html`"
    return re.sub(r'^\d+[a-z]?_', '', Path(nb_name).stem) + '.html'

def site_link(m):
    return f'](https://fastaccum.github.io/fastaccum/{page_name(m.group(1))}{m.group(2) or ""})'

def raw_link(path):
    "An image of the repository, `../docs/images/x.png` as nbs/ links it, as PyPI can show it"
    return RAW_URL + str((root/'nbs'/path).resolve().relative_to(root))

def cell_text(cell):
    src = ''.join(cell['source'])
    lines = src.splitlines()
    if any(l.strip() in ('#| hide', '#|hide') for l in lines): return None
    if cell['cell_type'] == 'markdown':
        src = re.sub(r'(!\[[^\]]*\])\((\.\./[^)\s]+)\)', lambda m: f'{m.group(1)}({raw_link(m.group(2))})', src)
        return re.sub(r'\]\((?!https?:|#)(?:nbs/)?([\w.-]+\.ipynb)(#[^)\s]*)?\)', site_link, src.strip())
    code = '\n'.join(l for l in lines if not l.startswith('#|')).strip()
    images = [f'![What the code above prints]({raw_link(m.group(1))})' for m in re.finditer(r'^#\|\s*readme_image:\s*(\S+)', src, re.M)]
    return '\n\n'.join([f'```python\n{code}\n```'] + images) if code else None

def render(nb_path=root/'nbs'/'index.ipynb'):
    cells = json.loads(Path(nb_path).read_text())['cells']
    body = '\n\n'.join(t for t in map(cell_text, cells) if t)
    note = '<!-- Generated from nbs/index.ipynb by tools/sync_readme.py: edit the notebook, not this file. -->'
    return f'{note}\n\n{body}\n'

def pandoc_id(text):
    "The id pandoc (so Quarto) gives a heading (as docs/conf.py has MyST give it)"
    kept = ''.join(c for c in text.lower() if c.isalnum() or c.isspace() or c in '_-.')
    ident = '-'.join(kept.split())
    while ident and not ident[0].isalpha(): ident = ident[1:]
    return ident or 'section'

def page_ids(nb_path):
    "The heading ids of a notebook's page: its markdown headings and show_doc's (in its saved markdown outputs)"
    texts = []
    for c in json.loads(nb_path.read_text())['cells']:
        texts.append(''.join(c['source']) if c['cell_type'] == 'markdown' else '')
        for o in c.get('outputs', []): texts.append(''.join(o.get('data', {}).get('text/markdown', '')))
    heads = [re.sub(r'`|\*|\[([^]]*)\]\([^)]*\)', r'\1', h) for t in texts for h in re.findall(r'^#{1,6}\s+(.+?)\s*#*\s*$', t, flags=re.M)]
    return {pandoc_id(h) for h in heads}

def broken_links(text):
    "Links of the README that lead nowhere: repository files that do not exist, docs pages or sections that do not"
    broken = [t for t in re.findall(r'\]\((?!https?:|#|mailto:)([^)#\s]+)', text) if not (root/t).exists()]
    broken += [RAW_URL + t for t in re.findall(re.escape(RAW_URL) + r'([^)\s]+)', text) if not (root/t).is_file()]
    pages = {page_name(p): p for p in (root/'nbs').glob('*.ipynb')}
    for page, frag in re.findall(re.escape(SITE_URL) + r'([\w.-]*)(?:#([^)\s]*))?\)', text):
        if not page: continue
        if page not in pages: broken.append(SITE_URL + page)
        elif frag and frag not in page_ids(pages[page]): broken.append(f'{SITE_URL}{page}#{frag}')
    return broken

if __name__ == '__main__':
    readme, text = root/'README.md', render()
    if '--check' in sys.argv:
        broken = broken_links(text)
        if broken: sys.exit(f'README.md links to what does not exist: {broken}')
        ok = readme.exists() and readme.read_text() == text
        print('README.md is in step with nbs/index.ipynb' if ok else
              'README.md is out of step with nbs/index.ipynb: run `python tools/sync_readme.py`')
        sys.exit(0 if ok else 1)
    readme.write_text(text)
