"""The console's stylesheet and its few lines of plain JavaScript (no build step).

The script posts every action form with the page's CSRF token and shows the answer inline (a
refusal stays beside the form, nothing is recorded; an answer that warns, or whose form has left
the page, in the page's flash line too), and follows the page's SSE stream: calls
that are no longer waiting leave the page, new ones join it, a run's story and live text update."""

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{display:flex;justify-content:space-between;align-items:center;padding:8px 20px;background:#1d2330;color:#fff}
header a{color:#fff;margin-right:16px;font-weight:600;text-decoration:none}
header input{width:10em}
main{padding:12px 24px;max-width:1200px}
h1{font-size:20px;word-break:break-all}
table.runs{border-collapse:collapse;width:100%;background:#fff}
.runs td,.runs th{padding:4px 8px;border-bottom:1px solid #e3e6ea;text-align:left;white-space:nowrap}
.phase{padding:1px 6px;border-radius:8px;background:#e8ecf2}
.phase.awaiting_approval,.phase.paused{background:#ffe9b3}.phase.completed{background:#d7f3dc}
.phase.failed,.phase.cancelled{background:#f8d4d4}
.filters{margin-bottom:12px}.filters label{margin-right:12px}
section.call{background:#fff;border:1px solid #e0c36a;border-left:4px solid #e0a800;padding:8px 12px;margin:10px 0}
section.call h3{margin:2px 0}section.call.doubt{border-color:#d98c8c;border-left-color:#a42828}
.phase.in_doubt{background:#f8d4d4}.resolve textarea{vertical-align:top;width:22em}.meta{color:#5a6270;margin:2px 0}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0}
pre.args{background:#f3f4f6;padding:6px}
form.act label{margin-right:8px}form.act input[name=reason]{width:24em}
.edit form label{display:block;margin:4px 0}.edit textarea{width:100%;min-height:4em}
button{padding:3px 12px;margin-right:4px}button.approve{background:#1f7a3a;color:#fff;border:0}
button.reject{background:#a42828;color:#fff;border:0}
.msg{margin-left:8px;font-weight:600;white-space:pre-line}.msg.bad,.refusal{color:#a42828}.msg.good{color:#1f7a3a}
.msg.warn{color:#8a5a00}#flash{margin:0 0 10px;padding:6px 10px;background:#fff;border:1px solid #e3e6ea}
.conv .m{background:#fff;border:1px solid #e3e6ea;border-radius:6px;padding:6px 10px;margin:6px 0;max-width:900px}
.conv .user{border-left:4px solid #3867d6}.conv .assistant{border-left:4px solid #20bf6b}
.conv .tool{border-left:4px solid #8854d0;margin-left:32px}.conv .tool.error{border-left-color:#a42828}
.who{font-weight:600;color:#5a6270;font-size:12px}.idx{color:#9aa1ad;font-size:11px}
#live{background:#fff;border:1px dashed #20bf6b;padding:6px 10px;min-height:1.4em}
.wf{font-size:12px}.wf .bar{display:flex;height:14px;background:#eef0f3;margin:2px 0 8px}
.wf .model{background:#3867d6}.wf .tool{background:#8854d0}.wf .wait{background:#e0a800}
.wf .legend span{display:inline-block;width:10px;height:10px;margin:0 3px 0 10px}
.tree ul{margin:2px 0 2px 18px;padding:0}.empty{color:#5a6270}
.controls form{display:inline-block;margin-right:16px;vertical-align:top}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dl.facts dd{margin:0}
"""

JS = r"""
const csrf = document.querySelector('meta[name=csrf]').content;
const byBox = document.getElementById('by');
if (localStorage.getItem('by')) byBox.value = localStorage.getItem('by');
byBox.addEventListener('change', () => localStorage.setItem('by', byBox.value));
document.addEventListener('submit', async (ev) => {
  const form = ev.target;
  if (!form.classList.contains('act')) return;
  ev.preventDefault();
  const data = new URLSearchParams(new FormData(form, ev.submitter));
  if (byBox.value) data.set('by', byBox.value);
  const msg = form.querySelector('.msg');
  msg.className = 'msg'; msg.textContent = '…';
  let answer;
  try {
    const r = await fetch(form.action, {method: 'POST', body: data,
      headers: {'X-CSRF-Token': csrf, 'Accept': 'application/json'}});
    answer = await r.json();
  } catch (e) { answer = {ok: false, message: 'no answer from the console: ' + e}; }
  const kind = answer.ok ? (answer.unserved ? 'warn' : 'good') : 'bad';
  msg.className = 'msg ' + kind;
  msg.textContent = answer.message;
  // A decided call's form leaves the page as the run moves on: an answer that warns (an approved
  // call no worker takes), or whose form has gone, stays in the page's flash line.
  const flash = document.getElementById('flash');
  if (flash && (answer.unserved || !form.isConnected)) {
    flash.hidden = false; flash.className = 'msg ' + kind; flash.textContent = answer.message;
  }
  if (answer.ok && answer.redirect) location.href = answer.redirect;
  if (answer.ok && form.classList.contains('clear')) form.reset();
});
function syncCalls(box, update) {
  if (!box) return;
  const keep = new Set(update.keys);
  box.querySelectorAll('[data-call]').forEach(el => { if (!keep.has(el.dataset.call)) el.remove(); });
  const have = new Set([...box.querySelectorAll('[data-call]')].map(el => el.dataset.call));
  for (const key of update.keys) {
    if (!have.has(key) && update.rows[key]) box.insertAdjacentHTML('beforeend', update.rows[key]);
  }
  const none = document.getElementById('none');
  if (none) none.hidden = update.keys.length > 0;
}
const stream = document.body.dataset.stream;
if (stream) {
  const src = new EventSource(stream);
  const live = document.getElementById('live');
  src.addEventListener('calls', e => syncCalls(document.getElementById('calls'), JSON.parse(e.data)));
  src.addEventListener('delta', e => { if (live) live.textContent += JSON.parse(e.data).text; });
  src.addEventListener('discard', () => { if (live) live.textContent = ''; });
  // What each section shows now, as the browser writes it: a section the stream sends again
  // unchanged (its first frame repeats the page as served) is left alone, with what a person typed.
  const shown = new Map([...document.querySelectorAll('[id]')].map(el => [el.id, el.innerHTML]));
  src.addEventListener('section', e => {
    const part = JSON.parse(e.data);
    const el = document.getElementById(part.id);
    if (!el) return;
    const parsed = document.createElement('template');
    parsed.innerHTML = part.html;
    if (shown.get(part.id) === parsed.innerHTML) return;
    shown.set(part.id, parsed.innerHTML);
    // An answer shown in a form this update replaces (the run moved on) stays in the flash line.
    const said = el.querySelector('.msg.good, .msg.warn, .msg.bad');
    const flash = document.getElementById('flash');
    if (said && said.textContent && flash) {
      flash.hidden = false; flash.className = said.className; flash.textContent = said.textContent;
    }
    el.innerHTML = part.html;
  });
  src.addEventListener('end', () => { src.close(); document.body.dataset.ended = '1'; });
}
"""
