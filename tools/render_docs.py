"""Render the notebooks to a static HTML site in `_site/`, without Quarto (which cannot be installed here).

    python tools/render_docs.py            # build _site/ (open _site/index.html)
    python tools/render_docs.py --check    # build, then open every page in headless Chromium and check it

The site is built the way nbdev builds the Quarto one: `nbdev-proc-nbs` processes the notebooks into `_proc/`
(it runs the `show_doc` cells into API sections and applies the cell directives), then each processed notebook
becomes one page, named as nbdev names it (`01_accumulate.ipynb` -> `accumulate.html`), with its saved outputs
(plots included: notebooks are committed executed, as in any nbdev project; refresh them with
`nbdev-test --save`). The GitHub deploy workflow builds the real Quarto site from the same notebooks.

`--check` is the reader's test: each page must show its title and API sections, its plots, and no error
output; a screenshot of each goes to `_site/screenshots/`. Without Chromium it says so and exits 0 (skipped).
"""
import argparse, json, re, shutil, subprocess, sys, tempfile
from pathlib import Path

root = Path(__file__).resolve().parent.parent
site, proc = root/'_site', root/'_proc'
SITE_URL = 'https://fastaccum.github.io/fastaccum/'

# What a reader must find on each page: API names (show_doc sections) and the least number of plots.
EXPECTED = {
    'index.html': dict(api=[], plots=0),
    'window.html': dict(api=['AccumWindow', 'plan_epoch'], plots=0),
    'loaders.html': dict(api=['epoch_sizes', 'loader_bs'], plots=0),
    'checks.html': dict(api=['check_positive_int', 'check_count'], plots=0),
    'accumulate.html': dict(api=['GradientAccumulation'], plots=0),
    'schedule.html': dict(api=['GradientAccumulationSchedule', 'GradientAccumulationSchedule.plot_schedule'], plots=2),
    'integrations.html': dict(api=['fix_wandb_config', 'StepLoggers'], plots=1),
    'reliability.html': dict(api=[], plots=0),
    'items.html': dict(api=[], plots=0),
    'lm_tutorial.html': dict(api=[], plots=3),
    'demo.html': dict(api=['run_demo', 'digits_dls'], plots=1),
    'distributed.html': dict(api=['fix_distributed_dl_broadcast', 'ddp_world_size'], plots=0),
    'faq.html': dict(api=[], plots=0),
    'benchmarks.html': dict(api=['run_benchmarks', 'speed_table', 'exactness_table', 'memory_table'], plots=3),
    'testing.html': dict(api=['reference_fit', 'synth_learner'], plots=0),
    'all.html': dict(api=[], plots=0),
}

CSS = '''<style>
body { margin: 0; }
#fa-nav { position: fixed; top: 0; left: 0; width: 230px; height: 100%; overflow-y: auto; padding: 16px;
          box-sizing: border-box; background: #f6f8fa; border-right: 1px solid #ddd; font: 14px sans-serif; }
#fa-nav a { display: block; padding: 4px 0; color: #0366d6; text-decoration: none; }
#fa-nav a.current { font-weight: bold; color: #000; }
#fa-main { margin-left: 250px; max-width: 1000px; padding: 8px 16px; }
</style>'''


def frontmatter(nb):
    "Title, description and output file from the raw YAML cell nbdev puts first"
    raw = next((c for c in nb['cells'] if c['cell_type'] == 'raw'), None)
    meta = {}
    if raw is not None:
        text = ''.join(raw['source'])
        for key in ('title', 'description', 'output-file'):
            m = re.search(rf"^{key}: ('?)(.*?)\1\s*$", text, flags=re.M | re.S) if key != 'description' else \
                re.search(r"^description: (.*?)\n(?=\S|$)", text, flags=re.M | re.S)
            if m: meta[key] = (m.group(2) if key != 'description' else m.group(1)).strip().strip("'").replace('\n  ', ' ')
        nb['cells'].remove(raw)
    return meta


def page_name(nb_path, meta):
    return meta.get('output-file') or re.sub(r'^\d+[a-z]?_', '', nb_path.stem) + '.html'


def local_links(text, names):
    "Point links at notebooks and at the deployed site to the local pages"
    text = text.replace(SITE_URL, '')
    text = re.sub(r'\{target="_blank"[^}]*\}', '', text)            # Quarto-only link attributes
    return re.sub(r'([\w.-]+)\.ipynb', lambda m: names.get(m.group(1), m.group(0)), text)


def prepare(nb, meta, names):
    "Turn a processed notebook into one nbconvert renders as the page a reader should see"
    cells = []
    if meta.get('title'):
        head = f"# {meta['title']}" + (f"\n\n> {meta['description']}" if meta.get('description') else '')
        cells.append(dict(cell_type='markdown', id='page-title', metadata={}, source=head))
    for c in nb['cells']:
        src = ''.join(c['source'])
        c['metadata'] = {}   # nbdev's processing leaves timings there that nbformat's schema refuses
        if c['cell_type'] == 'markdown':
            c['source'] = local_links(src, names)
        elif c['cell_type'] == 'code':
            directives = [l for l in src.splitlines() if l.startswith('#|')]
            c['source'] = '\n'.join(l for l in src.splitlines() if not l.startswith('#|')).strip()
            if any('echo: false' in d for d in directives): c.setdefault('metadata', {})['tags'] = ['remove_input']
            for o in c.get('outputs', []):
                if 'text/markdown' in o.get('data', {}):
                    md = o['data']['text/markdown']
                    o['data'] = {'text/markdown': local_links(''.join(md) if isinstance(md, list) else md, names)}
        cells.append(c)
    nb['cells'] = cells
    return nb


def build():
    "Process the notebooks with nbdev and write one HTML page each into `_site/`"
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    res = subprocess.run([str(Path(sys.executable).parent/'nbdev-proc-nbs'), '--force'], cwd=root, capture_output=True, text=True)
    if res.returncode: sys.exit(f'nbdev-proc-nbs failed:\n{res.stdout}{res.stderr}')
    if site.exists(): shutil.rmtree(site)
    site.mkdir()
    for asset in (root/'nbs').iterdir():   # images and other files the pages link to (e.g. nbs/bench/*.png)
        if asset.is_dir() and not asset.name.startswith(('.', '_')): shutil.copytree(asset, site/asset.name)
    nbs = sorted(proc.glob('*.ipynb'), key=lambda p: (p.stem != 'index', p.stem))
    pages = []
    for path in nbs:
        nb = json.loads(path.read_text())
        meta = frontmatter(nb)
        pages.append((path, nb, meta, page_name(path, meta)))
    names = {p.stem: name for p, _, _, name in pages}
    config = Config()
    config.TagRemovePreprocessor.remove_input_tags = ('remove_input',)
    config.TagRemovePreprocessor.enabled = True
    config.HTMLExporter.exclude_input_prompt = config.HTMLExporter.exclude_output_prompt = True
    exporter = HTMLExporter(config=config, template_name='lab')
    nav_items = [(name, meta.get('title') or name) for _, _, meta, name in pages]
    for path, nb, meta, name in pages:
        body, _ = exporter.from_notebook_node(nbformat.from_dict(prepare(nb, meta, names)))
        nav = '<nav id="fa-nav"><b>fastaccum</b>' + ''.join(
            f'<a href="{n}"{" class=current" if n == name else ""}>{t}</a>' for n, t in nav_items) + '</nav>'
        body = body.replace('</head>', CSS + '</head>', 1)
        body = re.sub(r'(<body[^>]*>)', r'\1' + nav.replace('\\', r'\\') + '<div id="fa-main">', body, count=1)
        body = body.replace('</body>', '</div></body>', 1)
        (site/name).write_text(body)
    return [name for *_, name in pages]


def chromium():
    return shutil.which('chromium') or shutil.which('chromium-browser')


def browse(page, shot=None):
    "The DOM of `page` after headless Chromium rendered it, and optionally a screenshot"
    flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
             '--disable-sync', '--no-first-run', '--disable-quic', '--hide-scrollbars']
    with tempfile.TemporaryDirectory() as profile:
        args = [chromium(), *flags, f'--user-data-dir={profile}']
        url = (site/page).as_uri()
        if shot: subprocess.run(args + [f'--screenshot={shot}', '--window-size=1280,1600', url], capture_output=True, timeout=120)
        return subprocess.run(args + ['--dump-dom', url], capture_output=True, text=True, timeout=120).stdout


def check(pages):
    "Open each page as a reader would; return the problems found"
    problems, shots = [], site/'screenshots'
    shots.mkdir(exist_ok=True)
    missing = sorted(set(EXPECTED) - set(pages))
    if missing: problems.append(f'pages missing from the site: {missing}')
    for page in pages:
        dom = browse(page, shots/page.replace('.html', '.png'))
        text = re.sub(r'<[^>]+>', ' ', dom)
        want = EXPECTED.get(page, dict(api=[], plots=0))
        if '<h1' not in dom: problems.append(f'{page}: no title')
        for api in want['api']:
            # a show_doc section: a heading holding the name (nbconvert adds an anchor link after it)
            if not re.search(rf'<h[2-4][^>]*>\s*{re.escape(api)}\s*(<a class="anchor-link"[^>]*>[^<]*</a>)?\s*</h[2-4]>', dom):
                problems.append(f'{page}: no API section for {api}')
        images = re.findall(r'<img[^>]+src="([^"]+)"', dom)
        broken = [src for src in images if not src.startswith('data:') and not (site/src).exists()]
        if broken: problems.append(f'{page}: images that do not load: {broken}')
        plots = len([src for src in images if src.startswith('data:image/png') or src.endswith('.png')])
        if plots < want['plots']: problems.append(f'{page}: {plots} plots, expected at least {want["plots"]}')
        for bad in ('Traceback (most recent call last)', 'Error in ', 'NameError', 'AssertionError'):
            if bad in text: problems.append(f'{page}: error output ({bad!r})')
        if not (shots/page.replace('.html', '.png')).exists(): problems.append(f'{page}: no screenshot')
    return problems


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--check', action='store_true', help='open every page in headless Chromium and check it')
    args = ap.parse_args()
    if args.check and not chromium():
        print('SKIP docs site: Chromium is not installed (apt-get install chromium); the site was not checked')
        sys.exit(0)
    pages = build()
    print(f'built {len(pages)} pages in {site}')
    if args.check:
        problems = check(pages)
        print('\n'.join(problems) if problems else f'all {len(pages)} pages show their API sections and plots, and no errors; '
                                                   f'screenshots in {site/"screenshots"}')
        sys.exit(1 if problems else 0)
