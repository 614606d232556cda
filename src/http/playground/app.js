// The playground: plain browser JavaScript over the server's own API, nothing loaded from elsewhere.
const $ = (id) => document.getElementById(id);
const keyStorage = 'onnx-gateway-key';

const keyInput = $('key');
keyInput.value = localStorage.getItem(keyStorage) ?? '';
keyInput.addEventListener('input', () => localStorage.setItem(keyStorage, keyInput.value));
keyInput.addEventListener('change', loadModels);

/** An API error as the server tells it: its message, with the status and code for context. */
class ApiFailure extends Error {
  constructor(status, error) {
    super(error?.message ?? `The server answered HTTP ${status}.`);
    this.status = status;
    this.code = error?.code ?? error?.type;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (keyInput.value) headers.authorization = `Bearer ${keyInput.value}`;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = await response.json().catch(() => undefined);
  if (!response.ok) throw new ApiFailure(response.status, json?.error);
  return json;
}

const element = (tag, props = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
};

function showError(target, error) {
  const detail = error instanceof ApiFailure ? `HTTP ${error.status}${error.code ? ` · ${error.code}` : ''}` : '';
  target.replaceChildren(
    element(
      'p',
      { className: 'error' },
      element('strong', {}, error.message),
      detail ? element('small', {}, detail) : '',
    ),
  );
}

/** Runs a panel's action with its button disabled, its metadata line cleared and errors shown in place. */
function panel(button, meta, out, action) {
  $(button).addEventListener('click', async () => {
    const started = performance.now();
    $(button).disabled = true;
    $(meta).textContent = '';
    try {
      const summary = await action($(out));
      $(meta).textContent = [summary, `${Math.round(performance.now() - started)} ms`].filter(Boolean).join(' · ');
    } catch (error) {
      showError($(out), error);
    } finally {
      $(button).disabled = false;
    }
  });
}

const lines = (id) =>
  $(id)
    .value.split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

async function loadStatus() {
  const status = $('status');
  try {
    const health = await fetch('/health').then((r) => r.json());
    status.textContent = health.status === 'ok' ? `ready · ${plural(health.models.length, 'model')}` : 'warming up…';
    status.className = `status ${health.status === 'ok' ? 'ok' : 'wait'}`;
    if (health.status !== 'ok') setTimeout(loadStatus, 2000);
  } catch {
    status.textContent = 'unreachable';
    status.className = 'status bad';
  }
}

let modelsRequest = 0;

async function loadModels() {
  const pickers = [
    [$('embed-model'), 'embedding', 'embed-out'],
    [$('rerank-model'), 'rerank', 'rerank-out'],
  ];
  // Only the answer for the latest key counts: an earlier, slower one must not overwrite it.
  const request = ++modelsRequest;
  try {
    const { data } = await api('GET', '/v1/models');
    if (request !== modelsRequest) return;
    for (const [select, task, out] of pickers) {
      const models = data.filter((m) => m.task === task);
      select.replaceChildren(
        ...models.map((m) => new Option(`${m.id}${m.dimensions ? ` (${m.dimensions}-dim)` : ''} · ${m.variant}`, m.id)),
      );
      if (models.length === 0) select.append(new Option(`no ${task} model served`, ''));
      $(out).replaceChildren();
    }
  } catch (error) {
    if (request !== modelsRequest) return;
    for (const [select, , out] of pickers) {
      select.replaceChildren(new Option('(models unavailable)', ''));
      showError($(out), error);
    }
  }
}

const dot = (a, b) => a.reduce((sum, x, k) => sum + x * b[k], 0);

panel('embed-run', 'embed-meta', 'embed-out', async (out) => {
  const texts = lines('texts');
  const { data, model, usage } = await api('POST', '/v1/embeddings', {
    model: $('embed-model').value || undefined,
    input: texts,
  });
  const vectors = data.map((d) => d.embedding);
  const norms = vectors.map((v) => Math.sqrt(dot(v, v)));
  const table = element('table', { className: 'matrix' });
  const head = table.createTHead().insertRow();
  head.append(element('th'), ...texts.map((text, i) => element('th', { title: text }, `#${i + 1}`)));
  const body = table.createTBody();
  vectors.forEach((a, i) => {
    const row = body.insertRow();
    row.append(
      element(
        'th',
        { title: texts[i] },
        element('span', { className: 'index' }, `#${i + 1}`),
        element('span', { className: 'text' }, texts[i]),
      ),
    );
    vectors.forEach((b, j) => {
      const cosine = dot(a, b) / (norms[i] * norms[j] || 1);
      const cell = row.insertCell();
      cell.textContent = cosine.toFixed(3);
      cell.title = `${texts[i]}\n${texts[j]}`;
      // Shade by similarity: white at 0 or below, deep blue at 1 (with light text on the darkest).
      const strength = Math.max(0, Math.min(1, cosine));
      cell.style.background = `rgba(37, 99, 235, ${(strength * 0.85).toFixed(3)})`;
      if (strength > 0.6) cell.style.color = '#fff';
    });
  });
  out.replaceChildren(table);
  return `${model} · ${plural(vectors.length, 'text')} · ${vectors[0]?.length ?? 0} dimensions · ${plural(usage.prompt_tokens, 'token')}`;
});

panel('rerank-run', 'rerank-meta', 'rerank-out', async (out) => {
  const documents = lines('documents');
  const { results, model } = await api('POST', '/v1/rerank', {
    model: $('rerank-model').value || undefined,
    query: $('query').value,
    documents,
  });
  out.replaceChildren(
    ...results.map((r) => {
      const bar = element('span', { className: 'bar' });
      bar.style.width = `${(Math.max(0, Math.min(1, r.relevance_score)) * 100).toFixed(1)}%`;
      return element(
        'li',
        {},
        element('span', { className: 'score' }, r.relevance_score.toFixed(3)),
        element('span', { className: 'doc' }, documents[r.index], element('span', { className: 'track' }, bar)),
      );
    }),
  );
  return `${model} · ${plural(results.length, 'document')}`;
});

const finished = new Set(['succeeded', 'failed', 'cancelled']);

panel('search-run', 'search-meta', 'search-out', async (out) => {
  out.replaceChildren(element('li', { className: 'pending' }, 'Creating the task…'));
  let task = await api('POST', '/v1/web-search/search', {
    query: $('search-query').value,
    count: Number($('search-count').value),
    freshness: $('search-freshness').value,
  });
  // Long-poll until the task ends; each poll returns at the latest after `wait` seconds.
  while (!finished.has(task.state)) {
    out.replaceChildren(
      element(
        'li',
        { className: 'pending' },
        `Task ${task.state}, expected in about ${plural(task.estimate_wait_seconds, 'second')}…`,
      ),
    );
    task = await api('GET', `/v1/web-search/search/${task.id}?wait=10`);
  }
  if (task.state !== 'succeeded')
    throw new Error(task.error ? `${task.error.message} (${task.error.code})` : `The search task was ${task.state}.`);
  const results = task.results ?? [];
  out.replaceChildren(
    ...results.map((r) => {
      const linkable = /^https?:\/\//i.test(r.url);
      const title = linkable
        ? element('a', { href: r.url, target: '_blank', rel: 'noreferrer' }, r.title || r.url)
        : element('span', {}, r.title || r.url);
      return element(
        'li',
        {},
        element('div', { className: 'title' }, title, element('span', { className: 'score' }, r.score.toFixed(3))),
        element(
          'div',
          { className: 'url' },
          r.url,
          r.published_date ? ` · ${r.published_date.slice(0, 10)}` : '',
          ` · ${r.source}`,
        ),
        element('p', {}, r.snippet),
      );
    }),
  );
  if (results.length === 0) out.replaceChildren(element('li', { className: 'pending' }, 'No results.'));
  return `${task.provider} · ${plural(results.length, 'result')}`;
});

$('image-file').addEventListener('change', () => {
  const file = $('image-file').files[0];
  const preview = $('image-preview');
  if (preview.src) URL.revokeObjectURL(preview.src);
  preview.hidden = !file;
  if (file) preview.src = URL.createObjectURL(file);
});

async function base64Of(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

panel('image-run', 'image-meta', 'image-out', async (out) => {
  const file = $('image-file').files[0];
  if (!file) throw new Error('Choose an image first.');
  out.replaceChildren(element('p', { className: 'pending' }, 'Editing…'));
  const result = await api('POST', '/v1/images/edits', {
    model: $('image-model').value.trim() || 'auto',
    prompt: $('image-prompt').value,
    image: [await base64Of(file)],
    size: $('image-size').value,
    response_format: 'b64_json',
  });
  const src = `data:image/${result.output_format};base64,${result.data[0].b64_json}`;
  const image = element('img', { src, alt: result.data[0].revised_prompt });
  const download = element('a', { href: src, download: `edited.${result.output_format}` }, 'Download');
  out.replaceChildren(
    element('figure', {}, image, element('figcaption', {}, result.data[0].revised_prompt, ' · ', download)),
  );
  return `${result.size} ${result.output_format}`;
});

loadStatus();
loadModels();
