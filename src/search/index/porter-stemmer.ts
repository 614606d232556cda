/**
 * The Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", 1980), the same algorithm
 * as SQLite FTS5's `porter` tokenizer and Lucene's PorterStemFilter: "connections", "connected"
 * and "connecting" all become "connect". Input is one lower-case word; words of one or two
 * letters, and words with characters other than a-z, are returned as they are.
 */

/** Letter i of w is a consonant ('y' is one at the start or after a vowel). */
function consonant(w: string, i: number): boolean {
  switch (w[i]) {
    case 'a':
    case 'e':
    case 'i':
    case 'o':
    case 'u':
      return false;
    case 'y':
      return i === 0 || !consonant(w, i - 1);
    default:
      return true;
  }
}

/** m: the number of vowel-consonant sequences in w[0, end), [C](VC){m}[V]. */
function measure(w: string, end: number): number {
  let m = 0;
  let i = 0;
  while (i < end && consonant(w, i)) i++;
  for (;;) {
    while (i < end && !consonant(w, i)) i++;
    if (i >= end) return m;
    while (i < end && consonant(w, i)) i++;
    m++;
  }
}

function hasVowel(w: string, end: number): boolean {
  for (let i = 0; i < end; i++) if (!consonant(w, i)) return true;
  return false;
}

function doubleConsonant(w: string, end: number): boolean {
  return end >= 2 && w[end - 1] === w[end - 2] && consonant(w, end - 1);
}

/** w[0, end) ends consonant-vowel-consonant, the last not w, x or y (as in "hop", not "snow"). */
function cvc(w: string, end: number): boolean {
  if (end < 3 || !consonant(w, end - 1) || consonant(w, end - 2) || !consonant(w, end - 3)) return false;
  const last = w[end - 1];
  return last !== 'w' && last !== 'x' && last !== 'y';
}

/** If w ends with suffix and the stem before it has measure > min, the suffix is replaced. */
function replace(w: string, suffix: string, replacement: string, min: number): string | undefined {
  if (!w.endsWith(suffix)) return undefined;
  const stem = w.length - suffix.length;
  return measure(w, stem) > min ? w.slice(0, stem) + replacement : w;
}

const step2Rules: [string, string][] = [
  ['ational', 'ate'],
  ['tional', 'tion'],
  ['enci', 'ence'],
  ['anci', 'ance'],
  ['izer', 'ize'],
  ['bli', 'ble'],
  ['alli', 'al'],
  ['entli', 'ent'],
  ['eli', 'e'],
  ['ousli', 'ous'],
  ['ization', 'ize'],
  ['ation', 'ate'],
  ['ator', 'ate'],
  ['alism', 'al'],
  ['iveness', 'ive'],
  ['fulness', 'ful'],
  ['ousness', 'ous'],
  ['aliti', 'al'],
  ['iviti', 'ive'],
  ['biliti', 'ble'],
  ['logi', 'log'],
];
const step3Rules: [string, string][] = [
  ['icate', 'ic'],
  ['ative', ''],
  ['alize', 'al'],
  ['iciti', 'ic'],
  ['ical', 'ic'],
  ['ful', ''],
  ['ness', ''],
];
const step4Suffixes = [
  'al',
  'ance',
  'ence',
  'er',
  'ic',
  'able',
  'ible',
  'ant',
  'ement',
  'ment',
  'ent',
  'ion',
  'ou',
  'ism',
  'ate',
  'iti',
  'ous',
  'ive',
  'ize',
];

/** The first rule whose suffix ends w decides (the longest match, as the rule lists are ordered). */
function applyRules(w: string, rules: readonly [string, string][], min: number): string {
  let best: [string, string] | undefined;
  for (const rule of rules) if (w.endsWith(rule[0]) && (!best || rule[0].length > best[0].length)) best = rule;
  return best ? replace(w, best[0], best[1], min)! : w;
}

export function porterStem(word: string): string {
  if (word.length <= 2 || !/^[a-z]+$/.test(word)) return word;
  let w = word;

  // Step 1a: plurals.
  if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('ies')) w = w.slice(0, -2);
  else if (w.endsWith('ss')) {
    // unchanged
  } else if (w.endsWith('s')) w = w.slice(0, -1);

  // Step 1b: -eed, -ed, -ing.
  if (w.endsWith('eed')) {
    if (measure(w, w.length - 3) > 0) w = w.slice(0, -1);
  } else {
    const suffix = w.endsWith('ed') ? 2 : w.endsWith('ing') ? 3 : 0;
    if (suffix > 0 && hasVowel(w, w.length - suffix)) {
      w = w.slice(0, -suffix);
      if (w.endsWith('at') || w.endsWith('bl') || w.endsWith('iz')) w += 'e';
      else if (doubleConsonant(w, w.length) && !/[lsz]$/.test(w)) w = w.slice(0, -1);
      else if (measure(w, w.length) === 1 && cvc(w, w.length)) w += 'e';
    }
  }

  // Step 1c: y -> i after a vowel in the stem.
  if (w.endsWith('y') && hasVowel(w, w.length - 1)) w = w.slice(0, -1) + 'i';

  // Steps 2 and 3: double and single suffixes, when the stem has measure > 0.
  w = applyRules(w, step2Rules, 0);
  w = applyRules(w, step3Rules, 0);

  // Step 4: remove a suffix when the stem has measure > 1 (-ion only after s or t).
  let longest = '';
  for (const suffix of step4Suffixes) if (w.endsWith(suffix) && suffix.length > longest.length) longest = suffix;
  if (longest) {
    const stem = w.length - longest.length;
    if (measure(w, stem) > 1 && (longest !== 'ion' || /[st]$/.test(w.slice(0, stem)))) w = w.slice(0, stem);
  }

  // Step 5: a final -e, and -ll.
  if (w.endsWith('e')) {
    const m = measure(w, w.length - 1);
    if (m > 1 || (m === 1 && !cvc(w, w.length - 1))) w = w.slice(0, -1);
  }
  if (w.endsWith('ll') && measure(w, w.length) > 1) w = w.slice(0, -1);
  return w;
}
