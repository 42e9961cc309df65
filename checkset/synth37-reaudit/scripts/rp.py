"""Audit replay of a snapshot device trace (standard library only).
State before the trace is rebuilt from the final segments (blocks alive at the end that the trace
never allocated, plus blocks freed in the trace that it never allocated)."""
import pickle, glob, os, collections
D = '/work/checkset/synth37'
GiB = 2**30; MiB = 2**20

def load(stem):
    f = [p for p in glob.glob(D + '/*') if os.path.basename(p).startswith(stem)][0]
    d = pickle.load(open(f, 'rb'))
    if isinstance(d, list):
        d = {'segments': d, 'device_traces': []}
    return d

def rnd(sz, npu=False):
    if npu: sz += 32
    return max(512, (sz + 511) // 512 * 512)

class R:
    def __init__(self, d, dev):
        self.d = d; self.dev = dev
        T = d['device_traces'][dev] if dev < len(d['device_traces']) else []
        self.T = T
        segs = [s for s in d['segments'] if s['device'] == dev]
        self.segs = segs
        fin = {}
        for s in segs:
            for b in s['blocks']:
                if b['state'] == 'active_allocated':
                    fin[b['address']] = b
        # segments at start
        seg0 = {s['address']: (s['total_size'], s['stream']) for s in segs}
        for e in reversed(T):
            if e['action'] == 'segment_alloc': seg0.pop(e['addr'], None)
            elif e['action'] == 'segment_free': seg0[e['addr']] = (e['size'], e.get('stream'))
        allocated = set(); ghosts = {}
        for i, e in enumerate(T):
            if e['action'] == 'alloc': allocated.add(e['addr'])
            elif e['action'] == 'free_requested':
                if e['addr'] in allocated: allocated.discard(e['addr'])
                elif e['addr'] not in ghosts: ghosts[e['addr']] = (e['size'], e.get('frames', []), e.get('stream'))
        # blocks live at end never allocated in the trace
        live_alloc = {}
        for i, e in enumerate(T):
            if e['action'] == 'alloc': live_alloc[e['addr']] = i
            elif e['action'] == 'free_requested': live_alloc.pop(e['addr'], None)
        for a, b in fin.items():
            if a not in live_alloc and a not in ghosts:
                ghosts[a] = (b['requested_size'], b.get('frames', []), None)
        self.ghosts = ghosts
        cur = {a: (v[0], -1, v[1], v[2]) for a, v in ghosts.items()}
        seg = dict(seg0)
        A = sum(v[0] for v in cur.values()); Rs = sum(v[0] for v in seg.values())
        self.alloc0 = A; self.res0 = Rs; self.nblocks0 = len(cur)
        n = len(T)
        self.A = [0]*n; self.Rv = [0]*n
        self.life = {}   # alloc idx -> free idx or None
        for i, e in enumerate(T):
            a = e['action']
            if a == 'alloc':
                cur[e['addr']] = (e['size'], i, e.get('frames', []), e.get('stream')); A += e['size']; self.life[i] = None
            elif a == 'free_requested':
                v = cur.pop(e['addr'], None)
                if v: A -= v[0]
                if v and v[1] >= 0: self.life[v[1]] = i
            elif a == 'segment_alloc':
                seg[e['addr']] = (e['size'], e.get('stream')); Rs += e['size']
            elif a == 'segment_free':
                seg.pop(e['addr'], None); Rs -= e['size']
            self.A[i] = A; self.Rv[i] = Rs
        self.end_live = cur
        if n:
            self.pk = max(range(n), key=lambda i: (self.A[i], -i))
    def live_at(self, idx):
        """list of (size, alloc_idx, frames) live right after idx"""
        out = []
        freed_before = set()
        for i in range(idx+1):
            e = self.T[i]
            if e['action'] == 'free_requested': freed_before.add(e['addr'])
        # ghosts: live until freed (first free_requested of their addr not matched by alloc)
        ghost_freed = set()
        seen_alloc = set()
        for i in range(idx+1):
            e = self.T[i]
            if e['action'] == 'alloc': seen_alloc.add(e['addr'])
            elif e['action'] == 'free_requested':
                if e['addr'] in seen_alloc: seen_alloc.discard(e['addr'])
                else: ghost_freed.add(e['addr'])
        for a, v in self.ghosts.items():
            if a not in ghost_freed: out.append((v[0], -1, v[1]))
        for ai, fi in self.life.items():
            if ai <= idx and (fi is None or fi > idx):
                out.append((self.T[ai]['size'], ai, self.T[ai].get('frames', [])))
        return out

def site(fr, skip=('site-packages', '/torch/', 'lib/python')):
    for f in fr:
        fn = f['filename']
        if any(s in fn for s in skip) or fn.startswith('??') or f.get('line', 0) == 0: continue
        return '%s:%d %s' % (fn.split('/')[-1], f['line'], f['name'])
    return '<none>' if not fr else '%s:%d %s' % (fr[0]['filename'].split('/')[-1], fr[0]['line'], fr[0]['name'])

def g(x): return '%.3f GiB' % (x / GiB)
def m(x): return '%.1f MiB' % (x / MiB)
