// The playground: plain browser JavaScript over the server's own API.
const $ = (id) => document.getElementById(id);
const keyInput = $('key');
keyInput.value = localStorage.getItem('onnx-gateway-key') ?? '';
keyInput.addEventListener('change', () => localStorage.setItem('onnx-gateway-key', keyInput.value));

async function api(method, path, body) {
  const headers = { 'content-type': 'application/json' };
  if (keyInput.value) headers.authorization = `Bearer ${keyInput.value}`;
  const response = await fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const json = await response.json();
  if (!response.ok) throw new Error(json.error?.message ?? `HTTP ${response.status}`);
  return json;
}

function showError(target, error) {
  target.innerHTML = '';
  const p = document.createElement('p');
  p.className = 'error';
  p.textContent = error.message;
  target.append(p);
}

const lines = (id) => $(id).value.split('\n').map((s) => s.trim()).filter(Boolean);

async function loadModels() {
  try {
    const { data } = await api('GET', '/v1/models');
    for (const [select, task] of [[$('embed-model'), 'embedding'], [$('rerank-model'), 'rerank']]) {
      select.innerHTML = '';
      for (const model of data.filter((m) => m.task === task)) select.append(new Option(model.id, model.id));
    }
  } catch (error) {
    showError($('embed-out'), error);
  }
}
keyInput.addEventListener('change', loadModels);
loadModels();

$('embed-run').addEventListener('click', async () => {
  const out = $('embed-out');
  const texts = lines('texts');
  try {
    const { data } = await api('POST', '/v1/embeddings', { model: $('embed-model').value || undefined, input: texts });
    const vectors = data.map((d) => d.embedding);
    const table = document.createElement('table');
    const head = table.insertRow();
    head.append(document.createElement('th'));
    texts.forEach((_, i) => { const th = document.createElement('th'); th.textContent = `#${i + 1}`; head.append(th); });
    vectors.forEach((a, i) => {
      const row = table.insertRow();
      const th = document.createElement('th');
      th.textContent = `#${i + 1}`;
      th.title = texts[i];
      row.append(th);
      vectors.forEach((b) => {
        const cosine = a.reduce((sum, x, k) => sum + x * b[k], 0);
        const cell = row.insertCell();
        cell.textContent = cosine.toFixed(3);
        cell.style.background = `rgba(47, 111, 222, ${Math.max(0, cosine) * 0.6})`;
      });
    });
    out.innerHTML = '';
    out.append(table);
  } catch (error) {
    showError(out, error);
  }
});

$('rerank-run').addEventListener('click', async () => {
  const out = $('rerank-out');
  const documents = lines('documents');
  try {
    const { results } = await api('POST', '/v1/rerank', { model: $('rerank-model').value || undefined, query: $('query').value, documents });
    out.innerHTML = '';
    for (const r of results) {
      const li = document.createElement('li');
      const score = document.createElement('span');
      score.className = 'score';
      score.textContent = r.relevance_score.toFixed(3);
      li.append(score, documents[r.index]);
      out.append(li);
    }
  } catch (error) {
    showError(out, error);
  }
});

$('search-run').addEventListener('click', async () => {
  const out = $('search-out');
  out.textContent = 'searching…';
  try {
    const task = await api('POST', '/v1/web-search/search', { query: $('search-query').value });
    const done = await api('GET', `/v1/web-search/search/${task.id}?wait=10`);
    out.innerHTML = '';
    if (done.state !== 'succeeded') throw new Error(done.error?.message ?? `task ${done.state}`);
    for (const r of done.results ?? []) {
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = r.url;
      a.textContent = r.title || r.url;
      li.append(a, document.createTextNode(` ${r.snippet ?? ''}`));
      out.append(li);
    }
    if (!out.childElementCount) out.textContent = 'No results.';
  } catch (error) {
    showError(out, error);
  }
});

$('image-run').addEventListener('click', async () => {
  const out = $('image-out');
  const file = $('image-file').files[0];
  if (!file) return showError(out, new Error('Choose an image first.'));
  out.textContent = 'working…';
  try {
    const bytes = new Uint8Array(await file.arrayBuffer());
    let binary = '';
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    const result = await api('POST', '/v1/images/edits', { image: [btoa(binary)], prompt: $('image-prompt').value, size: $('image-size').value, response_format: 'b64_json' });
    out.innerHTML = '';
    const img = document.createElement('img');
    img.src = `data:image/${result.output_format ?? 'png'};base64,${result.data[0].b64_json}`;
    const note = document.createElement('p');
    note.textContent = result.data[0].revised_prompt ?? '';
    out.append(img, note);
  } catch (error) {
    showError(out, error);
  }
});
