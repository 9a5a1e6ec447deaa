// gguf-split's shard names (`name-00001-of-00003.gguf` ...), the one place the browser code knows them; the same
// rule as core/gguf/file.py's shard_name and shard_number (tests/unit/test_web_rules.py holds both to the same
// answers). Names may be paths or URLs: the URL's path is what is matched, its query and fragment are kept.

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

function split(name) {
  const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(name) ? new URL(name) : null;
  return { url, path: url ? url.pathname : name };
}

// The name of shard `index` (0-based) of the `count` shards that `name` belongs to; null if `name` is not a shard's.
export function shardName(name, index, count) {
  const { url, path } = split(name);
  const m = SHARD.exec(path);
  if (!m) return null;
  const named = `${m[1]}-${String(index + 1).padStart(5, "0")}-of-${String(count).padStart(5, "0")}.gguf`;
  if (!url) return named;
  url.pathname = named;
  return url.href;
}

// [shard number (1-based), shard count] as a shard's name writes them; null for other names.
export function shardNumber(name) {
  const m = SHARD.exec(split(name).path);
  return m ? [Number(m[2]), Number(m[3])] : null;
}
