"""Write README.md from nbs/index.ipynb without Quarto (which cannot be installed here).

`python tools/sync_readme.py` rewrites README.md; `--check` exits 1 if README.md is out of step, or if one of
its links to a file of the repository leads nowhere.
Markdown cells are copied, code cells become ```python blocks; cells marked `#| hide` are left out and `#|`
directives are dropped, as nbdev's own README rendering does. Links between pages (`10_accumulate.ipynb`, right
from the docs site) become links from the repository's root (`nbs/10_accumulate.ipynb`).
"""
import json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent

def cell_text(cell):
    src = ''.join(cell['source'])
    lines = src.splitlines()
    if any(l.strip() in ('#| hide', '#|hide') for l in lines): return None
    if cell['cell_type'] == 'markdown': return re.sub(r'\]\((?!https?:|#|nbs/)([\w.-]+\.ipynb)', r'](nbs/\1', src.strip())
    code = '\n'.join(l for l in lines if not l.startswith('#|')).strip()
    return f'```python\n{code}\n```' if code else None

def render(nb_path=root/'nbs'/'index.ipynb'):
    cells = json.loads(Path(nb_path).read_text())['cells']
    body = '\n\n'.join(t for t in map(cell_text, cells) if t)
    note = '<!-- Generated from nbs/index.ipynb by tools/sync_readme.py: edit the notebook, not this file. -->'
    return f'{note}\n\n{body}\n'

def broken_links(text):
    "Relative links of the README that name no file of the repository"
    targets = re.findall(r'\]\((?!https?:|#|mailto:)([^)#\s]+)', text)
    return [t for t in targets if not (root/t).exists()]

if __name__ == '__main__':
    readme, text = root/'README.md', render()
    if '--check' in sys.argv:
        broken = broken_links(text)
        if broken: sys.exit(f'README.md links to files that do not exist: {broken}')
        ok = readme.exists() and readme.read_text() == text
        print('README.md is in step with nbs/index.ipynb' if ok else
              'README.md is out of step with nbs/index.ipynb: run `python tools/sync_readme.py`')
        sys.exit(0 if ok else 1)
    readme.write_text(text)
