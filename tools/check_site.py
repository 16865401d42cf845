"""The reader's check of the docs site that tools/docs.sh built into `_site/`: each page of nbs/sidebar.yml as a
reader meets it, in headless Chromium (Playwright's Python package, driving the system's Chromium).
    python tools/check_site.py      (`bash tools/docs.sh --check` builds the site, then runs this)
Each page must have its title (one `<h1>`, in `<title>` too); links that lead to a file of the site and `#fragments`
to an element of their page, and a section a link goes to shown below the sticky header; no progress frames,
warnings (stderr), tracebacks, machine paths, memory addresses or markup left as text (a link, Quarto's
`{target=...}`); no request to the network; examples that run from what the page shows: its visible code cells, in
order, in a fresh kernel (cells shown as not run are skipped; docs/run_pages.py runs them beside the build and records
it: a page whose shown code is not in that record has it run here); no code block that wraps (a long line scrolls
sideways in its box: docs/_static/site.css) and a copy button (sphinx-copybutton) on each code cell, none on outputs;
and, 400 px wide, nothing wider than the window. Nor the leftovers an author leaves: a note that cells have not run
yet, a target printed as missed (`1.42 (target <= 1.4)`), wording about the notebook's tests, an output whose code is
hidden (show_doc's documentation aside), a subtitle cut mid-sentence, a class documented as `*args, **kwargs`, a raw
Python list printed as a table. Screenshots at 1280 and 400 px go to `_site/screenshots/` (and `400/`).
First the check tests itself on a small site it builds from pages seeded with each defect: it must report each one.
Exit 0: every page reads well; 1: problems (listed by page); 77: no Chromium (with how to install it).
"""
import html, json, os, re, shutil, subprocess, sys, tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlsplit

root = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root/'docs'))
from pages import sidebar, page, VISION_KERNEL
from run_pages import example_key, run_examples

CHROMIUM = os.environ.get('CHROMIUM', '/usr/bin/chromium')
ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync',
        '--no-first-run']
OUTPUT_TEXT = [(r'Traceback \(most recent call last\)|^\w+(Error|Exception): ', 'a traceback'), (r'\w+Warning: ', 'a warning'),
               (r'█|\d+\.\d+% \[\d+/\d+\]|Epoch \d+/\d+ :|\|-{5,}', 'a progress frame'),
               (r'\b[A-Z]\w*\s*\(\s*\*args,\s*\*\*kwargs\s*\)', 'a class documented as `*args, **kwargs`')]   # show_doc's signature
PAGE_TEXT = [(rf'{re.escape(str(root))}|/tmp/|/home/\w|/root/|/Users/\w|site-packages', 'a machine path'),
             (r'\bat 0x[0-9a-fA-F]{6,}', 'a memory address'),
             (r'\{target=|\]\((?:https?:|[\w./-]+\.(?:html|ipynb))', 'markup left as text'),   # a link or Quarto's attributes
             # what the notebook's author left for themselves, not for a reader
             (r"\b(?:have|has|had) not (?:been )?run yet\b|\bnot (?:been )?run yet\b|\byet to (?:be )?run\b|\bTODO\b|\bFIXME\b",
              'a note that something has not run yet'),
             (r"\b(?:this|the) notebook['’]?s (?:own )?tests?\b|\bhelpers? (?:of|for) (?:the|this|these) (?:\w+ )?tests\b|\bhidden (?:test )?cells?\b",
              "wording about the notebook's tests"),
             (r'✗|❌|\btargets? (?:was |were |is |are )?(?:missed|not met)\b', 'a target shown as missed')]
# `1.42 (target <= 1.4)`, `1.46 (target <= 1.4: one extra forward)`; `1.101 against 1.02: over by 0.081`
TARGET = re.compile(r'(-?\d+(?:\.\d+)?)\s*[x×%]?\s*\((?:the )?(?:target|goal)\s*(<=|>=|<|>|≤|≥|=)\s*(-?\d+(?:\.\d+)?)[x×%]?'
                    r'(?:[:;,][^)]*)?\)')
OVER = re.compile(r'\b-?\d+(?:\.\d+)? against -?\d+(?:\.\d+)?: (?:over|above|below|under|missed) by\b')
MEETS = {'<=': float.__le__, '≤': float.__le__, '<': float.__lt__, '>=': float.__ge__, '≥': float.__ge__, '>': float.__gt__,
         '=': float.__eq__}
RAW_LIST = re.compile(r'^\s*\[\s*[\[({].*?[\])}]\s*,\s*[\[({]', re.S)   # [(0, 16), (1, 32)...], [[...], ...], [{...}, ...]
CUT = re.compile(r'(?:[,;(–—-]|\b(?:the|a|an|and|or|but|of|to|with|for|in|on|by|at|from|as|that|which|its|is|are|than))\s*$', re.I)


def leftovers(f, lo):
    "A reader's view of what an author left: targets printed as missed, raw lists as tables, a subtitle cut short..."
    out = [f'a target shown as missed: {m.group(0)!r}' for m in TARGET.finditer(f['text'])
           if not MEETS[m.group(2)](float(m.group(1)), float(m.group(3)))]
    out += [f'a target shown as missed: {m.group(0)!r}' for m in OVER.finditer(f['text'])]
    out += [f'a target shown as missed: {row!r} in a table with a `target` column' for row in lo['targets']]
    out += [f'a raw Python list printed as a table: {o.strip()[:60]!r}' for o in f['plain'] if RAW_LIST.match(o)]
    out += [f'an output whose code is hidden: {o[:60]!r}' for o in lo['hidden']]
    if CUT.search(lo['subtitle'].strip()): out.append(f'a subtitle cut mid-sentence: ...{lo["subtitle"].strip()[-50:]!r}')
    return out
FACTS = """() => ({h1: [...document.querySelectorAll('article h1')].map(h => h.textContent.replace('#', '').trim()),
  title: document.title, hrefs: [...document.querySelectorAll('a[href]')].map(a => a.href),
  outputs: [...document.querySelectorAll('.cell_output')].map(o => o.innerText),
  plain: [...document.querySelectorAll('.cell_output .output.text_plain, .cell_output .output.stream')].map(o => o.innerText), text: document.querySelector('article').innerText,
  stderr: [...document.querySelectorAll('.output.stderr, .output.traceback')].map(o => o.innerText),
  progress: document.querySelectorAll('.cell_output progress').length,
  code: [...document.querySelectorAll('div.cell:not(.tag_skip-execution) > .cell_input pre')].map(p => p.innerText),
  vision: !!document.querySelector('div.cell.tag_vision:not(.tag_skip-execution)'),
  section: (document.querySelector('article section section[id]') || {}).id})"""
COVERED = """id => {  // a heading a link to #id scrolled to: under what is fixed or sticky at the top of the window?
  const t = document.getElementById(id), r = (t.querySelector('h1,h2,h3,h4,h5,h6') || t).getBoundingClientRect();
  let cover = 0;
  for (const e of document.querySelectorAll('body *')) {
    const s = getComputedStyle(e), b = e.getBoundingClientRect();
    if (['fixed', 'sticky'].includes(s.position) && b.top <= 1 && b.bottom > 0 && b.height < innerHeight / 2
        && b.right > r.left && b.left < r.right) cover = Math.max(cover, b.bottom); }
  return r.top < cover - 1 ? `its top at ${Math.round(r.top)} px, the header's bottom at ${Math.round(cover)} px` : null}"""
WIDE = """() => {  // what is wider than the window and in no box that scrolls or clips it
  const w = document.documentElement.clientWidth, clips = e => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX);
  for (const e of document.querySelectorAll('article *')) {
    const r = e.getBoundingClientRect();
    if (r.right <= w + 1 || r.width === 0) continue;
    let p = e.parentElement; while (p && p !== document.body && !clips(p)) p = p.parentElement;
    if (!p || p === document.body) return `${e.tagName.toLowerCase()} ${Math.round(r.width)} px ("${e.innerText.slice(0, 40)}")`; }
  return document.documentElement.scrollWidth > w + 1 ? `the page is ${document.documentElement.scrollWidth} px` : null}"""
WRAPS = """() => [...document.querySelectorAll('article div.highlight pre')].filter(p => {  // code that wraps: unwrapped, wider
  const s = p.style.whiteSpace; p.style.whiteSpace = 'pre'; const wider = p.scrollWidth > p.clientWidth + 1; p.style.whiteSpace = s;
  return wider && getComputedStyle(p).whiteSpace !== 'pre' || wider && !['auto', 'scroll'].includes(getComputedStyle(p).overflowX) })
  .map(p => p.innerText.split('\\n').reduce((a, b) => b.length > a.length ? b : a, '').slice(0, 60))"""   # their longest lines
COPY = """() => ({inputs: document.querySelectorAll('div.cell_input:not(:has(button.copybtn))').length,
  outputs: document.querySelectorAll('div.cell_output button.copybtn').length})"""   # sphinx-copybutton's buttons
LEFTOVERS = """() => ({targets: [...document.querySelectorAll('article table')].flatMap(t => {  // a `target` column: at most
    const head = [...t.querySelectorAll('thead th, tr:first-child th')].map(h => h.innerText.trim());
    const at = head.indexOf('target'); if (at < 0) return [];
    return [...t.querySelectorAll('tbody tr')].map(r => [...r.children].map(c => c.innerText.trim())).filter(cells => {
      const nums = cells.map(Number), target = nums[at], first = nums.findIndex((v, i) => i !== at && cells[i] !== '' && !isNaN(v));
      return !isNaN(target) && first >= 0 && first < at && nums[first] > target; }).map(cells => cells.join(' | ')); }),
  subtitle: (e => e && e.tagName === 'P' ? e.innerText : '')((document.querySelector('article h1') || {}).nextElementSibling),
  hidden: [...document.querySelectorAll('div.cell.tag_remove-input:not(.tag_show-doc) .cell_output')].map(o => o.innerText.trim()).filter(t => t)
    .concat([...document.querySelectorAll('div.cell.tag_remove-input:not(.tag_show-doc) .cell_output img')].map(i => 'an image'))})"""


def link_problems(hrefs, site, ids={}):
    "Links to files the site lacks, and #fragments no element of their page has"
    out = []
    for u in map(urlsplit, dict.fromkeys(hrefs)):
        if u.scheme != 'file': continue
        target, frag = Path(unquote(u.path)), unquote(u.fragment)
        target = target/'index.html' if target.is_dir() else target
        if target not in ids: ids[target] = {html.unescape(i) for i in re.findall(r'\sid="([^"]*)"', target.read_text())} if target.is_file() else None
        shown = os.path.relpath(target, site) + (f'#{frag}' if frag else '')
        if ids[target] is None or re.search(r'\.(html|ipynb)\b', frag): out.append(f'a dead link: {shown}')   # MyST's unresolved link
        elif frag and frag not in ids[target]: out.append(f'a dead #fragment: {shown}')
    return out


def check(site, names, staged, record=None):
    "The problems of pages `names` of `site` ({page: [problem]}); `record`: a file of examples already run and passed"
    from playwright.sync_api import sync_playwright
    shots, problems, examples = site/'screenshots', {n: [] for n in names}, {}
    shutil.rmtree(shots, ignore_errors=True); (shots/'400').mkdir(parents=True)
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        browser = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=ARGS, headless=True)
        remote = []
        browser.route('**/*', lambda r: r.continue_() if r.request.url.startswith(('file:', 'data:', 'blob:'))
                      else (remote.append(r.request.url), r.abort()))
        pg = browser.new_page()
        for name in names:
            found, url, remote[:] = problems[name], (site/f'{name}.html').as_uri(), []
            if not (site/f'{name}.html').exists(): found.append('the page was not built'); continue
            pg.set_viewport_size({'width': 1280, 'height': 900}); pg.goto(url)
            f = pg.evaluate(FACTS)
            if len(f['h1']) != 1 or not f['title'].startswith(f['h1'][0]): found.append(f'no title of its own: <title> {f["title"]!r}, <h1> {f["h1"]}')
            found += link_problems(f['hrefs'], site)
            found += [f'{what} in an output: {m.group(0)[:80]!r}' for out in f['outputs'] for pattern, what in OUTPUT_TEXT
                      if (m := re.search(pattern, out, re.M))]
            found += [f'stderr or a traceback shown: {o[:100]!r}' for o in f['stderr']] + ['a progress bar in an output'] * bool(f['progress'])
            found += [f'{what} in the page: ...{f["text"][max(0, m.start()-40):m.end()+30]!r}...' for pattern, what in PAGE_TEXT
                      if (m := re.search(pattern, f['text']))]
            found += leftovers(f, pg.evaluate(LEFTOVERS))
            if wraps := pg.evaluate(WRAPS): found.append(f'{len(wraps)} code blocks wrap rather than scroll sideways: {wraps[0]!r}...')
            copy = pg.evaluate(COPY)
            if copy['inputs'] or copy['outputs']: found.append(f'copy buttons: {copy["inputs"]} code cells without one, {copy["outputs"]} on outputs')
            pg.screenshot(path=shots/f'{name}.png', full_page=True)
            if f['section']:
                pg.evaluate('id => { location.hash = id }', f['section']); pg.wait_for_timeout(300)
                if covered := pg.evaluate(COVERED, f['section']): found.append(f'#{f["section"]} is hidden under the sticky header: {covered}')
            pg.set_viewport_size({'width': 400, 'height': 900}); pg.goto(url)
            if wide := pg.evaluate(WIDE): found.append(f'400 px wide, it scrolls sideways: {wide}')
            pg.screenshot(path=shots/'400'/f'{name}.png', full_page=True)
            found += [f'a request to the network: {u[:100]}' for u in dict.fromkeys(remote)]
            if f['code']: examples[name] = (f['code'], VISION_KERNEL if f['vision'] else 'python3')
            print(f'checked {name}.html: {len(found)} problems', flush=True)
        browser.close()
    # the examples each page shows: proven by docs/run_pages.py (the record) when it ran exactly the code the page
    # shows, in order, in a fresh kernel (or as the first cells of the page's own run); else they run here
    passed = set(json.loads(record.read_text())) if record and record.exists() else set()
    key = {n: example_key(*e) for n, e in examples.items()}
    todo = [n for n in examples if key[n] not in passed]
    if todo: print(f'running the examples of {len(todo)} pages (not proven by the build): {", ".join(todo)}', flush=True)
    with ProcessPoolExecutor(2) as pool:
        for n, (ok, _, failed) in zip(todo, pool.map(run_examples, *zip(*[examples[n] for n in todo]), [staged]*len(todo))):
            if not ok: problems[n].append(failed)
            else: passed.add(key[n])
    if record and todo: record.parent.mkdir(parents=True, exist_ok=True); record.write_text(json.dumps(sorted(passed)))
    return {n: list(dict.fromkeys(p)) for n, p in problems.items() if p}


def self_test():
    "Build a small site from pages seeded with each defect, running them as the docs build does; check it"
    import nbformat.v4 as v4
    def code(src, *tags): c = v4.new_code_cell(src); c.metadata['tags'] = list(tags); return c
    seeded = v4.new_notebook(cells=[
        v4.new_markdown_cell(f'# Seeded\n\nA [dead link](missing.html), a [dead fragment](#nowhere), a machine path `{root}/nbs`, '
                             'and ![a remote image](https://example.com/a.png); \\[a link\\](index.html) left as text.\n\n<style>html { scroll-padding-top: 0 !important } '
                             ':target, h2 { scroll-margin-top: 0 !important } div.highlight pre { white-space: pre-wrap !important }</style>\n\n'
                             '<div style="width: 900px; background: #eee">wider than a phone</div>\n\n## A section'),
        code('helper = 1', 'remove-input'),   # an example below uses what only this hidden cell defines
        code('print("Epoch 1/3 : |----------| 0.00% [0/3]", helper)'), code('import warnings; warnings.warn("something")'),
        code('object()'), code('raise ValueError("bad")', 'raises-exception'), code(f'long = "{"x" * 150}"'),
        code('raise SystemExit("a cell shown as not run was run")', 'skip-execution', 'needs-gpu'),
        v4.new_markdown_cell('## Another section\n\n' + 'Text to scroll by. ' * 400)])
    untitled = v4.new_notebook(cells=[v4.new_markdown_cell('No heading here.')])
    # leftovers a reader should not see, each on a page of its own: (page, its cells, what the check must say)
    left = [('not_run', [v4.new_markdown_cell('# Not run\n\nThe GPU cells have not run yet.')], 'a note that something has not run yet'),
            ('missed', [v4.new_markdown_cell('# Missed\n\n| comparison | ratio | target |\n|---|---|---|\n| a / b | 1.10 | 1.02 |\n'
                                             '| c / d | 0.80 | 1.02 |'),
                        code('print("steps/s ratio: 1.42 (target <= 1.4)")\nprint("time: 1.46 (target <= 1.4: one extra forward)")\n'
                             'print("a / b: 1.101 against 1.02: over by 0.081")\nprint("c / d: 0.8 (target <= 1.02)")')],
             'a target shown as missed'),
            ('wording', [v4.new_markdown_cell("# Wording\n\n`make_data` is a helper of this notebook's tests.")],
             "wording about the notebook's tests"),
            ('hidden', [v4.new_markdown_cell('# Hidden'), code('print("an output whose code is hidden")', 'remove-input')],
             'an output whose code is hidden'),
            ('cut', [v4.new_markdown_cell('# Cut\n\nThe callback works with fastai, and the')], 'a subtitle cut mid-sentence'),
            ('kwargs', [v4.new_markdown_cell('# Kwargs'), code('from IPython.display import Markdown\n'
                        'Markdown("### SomeError\\n\\n>      SomeError (*args, **kwargs)\\n\\n*An error*")', 'remove-input', 'show-doc')],
             'a class documented as `*args, **kwargs`'),
            ('raw_list', [v4.new_markdown_cell('# Raw list'), code('[(epoch, 16 * 2**epoch) for epoch in range(4)]')],
             'a raw Python list printed as a table')]
    index = v4.new_notebook(cells=[v4.new_markdown_cell('# Home\n\n```{toctree}\nseeded\nuntitled\n' + '\n'.join(n for n, *_ in left) + '\n```')])
    with tempfile.TemporaryDirectory() as tmp:
        src, site = Path(tmp)/'src', Path(tmp)/'site'
        src.mkdir()
        for name, nb in [('index', index), ('seeded', seeded), ('untitled', untitled)] + [(n, v4.new_notebook(cells=c)) for n, c, _ in left]:
            nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'python3', 'language': 'python'}
            (src/f'{name}.ipynb').write_text(json.dumps(nb))
        subprocess.run([sys.executable, '-m', 'sphinx', '-q', '-E', '-b', 'html', '-c', str(root/'docs'), '-D', 'nb_execution_mode=force',
                        str(src), str(site)], check=True, capture_output=True)
        problems = check(site, ['seeded', 'untitled'] + [n for n, *_ in left], src)
        found = [p for ps in problems.values() for p in ps]
    want = ['no title of its own', 'a dead link: seeded.html#missing.html', 'a dead #fragment: seeded.html#nowhere', 'hidden under the sticky header',
            'a progress frame', 'a traceback in an output', 'stderr or a traceback', 'a warning', 'a machine path', 'a memory address',
            'a request to the network', "NameError: name 'helper'", '400 px wide, it scrolls sideways',
            'code blocks wrap rather than scroll sideways', 'markup left as text']
    missed = [w for w in want if not any(w in p for p in problems.get('seeded', []) + problems.get('untitled', []))]
    missed += [f'{what} (on its page {n})' for n, _, what in left if not any(what in p for p in problems.get(n, []))]
    if sum('a target shown as missed' in p for p in problems.get('missed', [])) != 4:   # each form, none met
        missed.append(f'the four targets shown as missed on its page missed (found: {problems.get("missed")})')
    return missed + [p for p in found if 'not run was run' in p], found


def ticker(every=30):
    "A line every `every` s while the check runs (building its test site and running examples print nothing)"
    import threading, time
    start = time.time()
    def tick():
        while True: time.sleep(every); print(f'  ... {time.time() - start:.0f} s', flush=True)
    threading.Thread(target=tick, daemon=True).start()


if __name__ == '__main__':
    ticker()
    if not Path(CHROMIUM).exists():
        print(f'SKIPPED: no Chromium at {CHROMIUM}: install it (`apt-get install -y chromium`, or set CHROMIUM to a Chromium or Chrome), '
              f'then run `bash tools/docs.sh --check`'); sys.exit(77)
    print('checking the check: a small site seeded with each defect', flush=True)
    missed, found = self_test()
    if missed: sys.exit('the check is broken: on its seeded site it missed ' + '; '.join(missed) + '\nit found:\n  ' + '\n  '.join(found))
    print(f'the check finds each defect seeded in its own test site ({len(found)} problems there)')
    import conf   # docs/conf.py: the build's cache folder (named after the library) holds the record of examples run
    names, site = [page(nb) for _, nb in sidebar()], root/'_site'
    problems = check(site, names, root/'_pages', Path(conf.nb_execution_cache_path)/'examples-passed.json')
    for name, ps in problems.items(): print(f'{name}.html\n' + ''.join(f'  - {p}\n' for p in ps), end='')
    n = sum(map(len, problems.values()))
    print(f'{n} problems on {len(problems)} of {len(names)} pages' if n else f'all {len(names)} pages read well',
          f'(screenshots, 1280 and 400 px wide: {site/"screenshots"})')
    sys.exit(1 if n else 0)
