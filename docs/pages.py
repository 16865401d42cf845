"""Stage the site's pages for Sphinx: the notebooks of nbs/sidebar.yml, processed by nbdev -> `_pages/`.

The pages are those of nbs/sidebar.yml, in its order, each named as nbdev names it (`10_accumulate.ipynb` ->
`accumulate.html`). nbdev stays the source: each notebook goes through nbdev's own processors for docs (those
`nbdev-proc-nbs` applies: front matter, show_doc cells added for exported names, cell directives as Quarto options,
doc links...), less three that only make sense for Quarto, which shows saved outputs and runs nothing:
  - `hide_` and `rm_export` drop `hide`, `export` and `exporti` cells; here each page runs, and the cells after them
    use what they define, so they stay, run but not shown (myst-nb's remove-cell);
  - `exec_show_docs` runs a notebook's imports and show_doc cells ahead of time (by a guess at which cells those
    are, which fails on a cell mixing imports with code); here the show_doc cells run in the page's own kernel, in
    order, after what they document.
What is left becomes what myst-nb reads: the front matter becomes the page's first heading (its title) and lead;
directives become cell tags (`echo: false` -> remove-input, `output: false` -> remove-output, `include: false` ->
remove-cell); cells flagged `cuda` (or `vision` without .venv-vision's kernel, `notest`, or `eval: false`) are shown
not run, as nbdev-test skips them. Links to notebooks and to the published site become links between pages, which
MyST resolves (`#fragments` too, as pandoc names headings). The home page gets the sidebar's sections as toctrees.
    python docs/pages.py [--vision]     (--vision: run the vision recipe in the kernel of .venv-vision)
"""
import hashlib, json, os, re, shutil, sys
from pathlib import Path
import yaml

root = Path(__file__).resolve().parent.parent
SITE_URL = 'https://fastaccum.github.io/fastaccum/'
VISION_KERNEL = 'fastaccum-vision'   # .venv-vision's kernel, registered by tools/docs.sh
NOT_RUN = {'cuda': 'needs-gpu', 'vision': 'needs-vision', 'notest': 'not-run'}   # flags of cells not run here: their tags
HIDDEN = {'hide', 'export', 'exporti', 'default_exp'}   # nbdev's directives of cells it leaves off the page

def sidebar():
    "[(section or None, notebook)] in reading order"
    out = []
    def walk(items, section):
        for i in items:
            if isinstance(i, str): out.append((section, i))
            else: walk(i['contents'], i['section'])
    walk(yaml.safe_load((root/'nbs'/'sidebar.yml').read_text())['website']['sidebar']['contents'], None)
    return out

def page(nb): return re.sub(r'^\d+[a-z]?_', '', Path(nb).stem)

def links(md, pages, shown={}):
    """Links to notebooks and to the published site -> MyST links between pages; to a page the site lacks, a link to
    the page that shows its `#fragment` (`shown`: {anchor: page}, a name defined in an internal module and documented on
    a page, as `checks.html#checkpointerror` -> `checkpoint.ipynb#checkpointerror`), else a plain link"""
    md = re.sub(r'\{target="_blank"[^}]*\}', '', md)
    # nbdev's add_links also links a name that is already a link's text ([[`FitPlan`](its doc)](41_plan.ipynb)): keep
    # the author's link
    md = re.sub(r'\[\[([^\]]*)\]\([^)\s]*\)\]\(', r'[\1](', md)
    def to_page(m):
        name, frag = page(m.group(2)), m.group(3) or ''
        if name not in pages and frag[1:] in shown: name = shown[frag[1:]]
        return f'[{m.group(1)}]({name}.ipynb{frag})' if name in pages else f'<a href="{name}.html{frag}">{m.group(1)}</a>'
    return re.sub(r'\[([^\]]*)\]\((?:' + re.escape(SITE_URL) + r')?([\w./-]+?)\.(?:ipynb|html)(#[^)\s]*)?\)', to_page, md)

def processed(nb_path):
    "The notebook as nbdev processes it for docs, less `hide_`, `rm_export` and `exec_show_docs` (see above)"
    from fastcore.nbio import read_nb, nb2str
    from nbdev.processors import FilterDefaults, exec_show_docs, hide_, rm_export
    class PageProcs(FilterDefaults):
        def base_procs(self): return [p for p in super().base_procs() if p not in (exec_show_docs, hide_, rm_export)]
    nb = read_nb(nb_path)
    PageProcs()(nb)
    # nbdev adds a show_doc cell after each exported name, unless the notebook shows it, which it misses for a method
    # added with `@patch` (the name it compares is `state_dict`, the one shown `GradientAccumulation.state_dict`): drop
    # those it added for an entry the notebook shows itself, or the page lists that entry twice
    shown = {c.source.strip() for c in nb.cells if c.cell_type == 'code' and not c.get('has_sd')}
    nb.cells = [c for c in nb.cells if not (c.get('has_sd') and c.source.strip() in shown)]
    return json.loads(nb2str(nb))   # plain dicts and lists

def documented(entries):
    "{anchor: page} of each name a page documents with its own `show_doc(name)` cell (nbdev's anchor: the lower-cased name)"
    from fastcore.nbio import read_nb
    return {m[1].lower(): page(nb_name) for _, nb_name in entries for c in read_nb(root/'nbs'/nb_name).cells
            if c.cell_type == 'code' for m in re.finditer(r'^show_doc\(([\w.]+)\)', c.source, re.M)}

def cell(c, pages, vision_kernel, shown={}):
    "A processed cell as myst-nb should show it, or None to leave it out"
    src = ''.join(c['source'])
    if c['cell_type'] == 'markdown':
        if src.strip().startswith('<!-- WARNING: THIS FILE WAS AUTOGENERATED'): return None
        return {**c, 'source': links(src, pages, shown)}
    if c['cell_type'] != 'code': return None
    d = {m[1]: m[2].strip() for m in re.finditer(r'^#\|\s*([\w-]+):?(.*)$', src, re.M)}
    c = {**c, 'source': '\n'.join(l for l in src.splitlines() if not l.startswith('#|')).strip(), 'outputs': []}
    tags = [t for k, v in [('echo', 'remove-input'), ('output', 'remove-output'), ('include', 'remove-cell')]
            for t in [v] if d.get(k) == 'false'] + ['remove-cell'] * bool(HIDDEN & d.keys())
    if 'vision' in d: tags.append('vision')
    if c['source'].startswith('show_doc('): tags.append('show-doc')   # its output is documentation, its code hidden
    not_run = [tag for flag, tag in NOT_RUN.items() if flag in d and not (flag == 'vision' and vision_kernel)]
    if d.get('eval') == 'false': not_run.append('not-run')
    if not_run: tags += ['skip-execution', *not_run]
    c['metadata'] = {'tags': list(dict.fromkeys(tags))} if tags else {}
    return c if c['source'] else None

def stage(dest=root/'_pages', vision_kernel=None):
    entries = sidebar()
    pages = {page(nb) for _, nb in entries}
    shown = documented(entries)
    if dest.exists(): shutil.rmtree(dest)
    dest.mkdir()
    os.chdir(root/'nbs')   # nbdev's processors read its configuration from here, as nbdev-proc-nbs does
    for section, nb_name in entries:
        nb = processed(root/'nbs'/nb_name)
        front = next((c for c in nb['cells'] if c['cell_type'] == 'raw' and ''.join(c['source']).startswith('---')), None)
        meta = yaml.safe_load(''.join(front['source']).strip().strip('-')) if front else {}
        head = f"# {meta.get('title', page(nb_name))}" + (f"\n\n{meta['description']}" if meta.get('description') else '')
        vision = vision_kernel and any('#| vision' in ''.join(c['source']) for c in nb['cells'])
        # show_doc cells run in the page's kernel: nbdev's show_doc, with the renderer of pyproject.toml
        setup = {'cell_type': 'code', 'id': 'show-doc', 'metadata': {'tags': ['remove-cell']}, 'outputs': [],
                 'execution_count': None, 'source': 'from nbdev.showdoc import show_doc'}
        cells = [c for c in (cell(c, pages, vision_kernel, shown) for c in nb['cells']) if c]
        cells = [setup] * any(c['source'].startswith('show_doc(') for c in cells) + cells
        for i, c in enumerate(cells):   # ids from the content: nbdev gives the show_doc cells it adds new random ones
            c['id'] = hashlib.sha1(f'{i} {c["source"]}'.encode()).hexdigest()[:8]   # (a page staged again is the same file)
        nb['cells'] = [{'cell_type': 'markdown', 'id': 'title', 'metadata': {}, 'source': links(head, pages)}] + cells
        name = vision_kernel if vision else 'python3'
        nb['metadata'] = {'kernelspec': {'name': name, 'display_name': name, 'language': 'python'}}
        (dest/f'{page(nb_name)}.ipynb').write_text(json.dumps(nb, indent=1))
    toc = ''
    for section in dict.fromkeys(s for s, _ in entries if s):
        toc += f'```{{toctree}}\n:hidden:\n:caption: {section}\n\n' + '\n'.join(page(n) for s, n in entries if s == section) + '\n```\n\n'
    index = dest/'index.ipynb'
    nb = json.loads(index.read_text())
    nb['cells'].append({'cell_type': 'markdown', 'id': 'toctree', 'metadata': {}, 'source': toc})
    index.write_text(json.dumps(nb, indent=1))

if __name__ == '__main__':
    stage(vision_kernel=VISION_KERNEL if '--vision' in sys.argv else None)
