"""Per-pool cached-free tracking: at each segment_alloc, free bytes cached in the same pool+stream."""
import rp, bisect
def track(r, npu=False, small_limit=1<<20):
    T = r.T
    # segments at start
    seg = {}
    segs_end = {s['address']: (s['total_size'], s['stream']) for s in r.segs}
    seg0 = dict(segs_end)
    for e in reversed(T):
        if e['action']=='segment_alloc': seg0.pop(e['addr'], None)
        elif e['action']=='segment_free': seg0[e['addr']] = (e['size'], e.get('stream'))
    seg = {a: [sz, st, 0] for a,(sz,st) in seg0.items()}  # addr -> [size, stream, allocated rounded]
    addrs = sorted(seg)
    def find(a):
        k = bisect.bisect_right(addrs, a) - 1
        if k >= 0 and addrs[k] <= a < addrs[k] + seg[addrs[k]][0]: return addrs[k]
        return None
    for a,(sz,fr,st) in r.ghosts.items():
        s = find(a)
        if s is not None: seg[s][2] += rp.rnd(sz, npu)
    live = {a: rp.rnd(v[0], npu) for a,v in r.ghosts.items()}
    out = []
    for i,e in enumerate(T):
        act = e['action']
        if act == 'alloc':
            s = find(e['addr']); rs = rp.rnd(e['size'], npu); live[e['addr']] = rs
            if s is not None: seg[s][2] += rs
        elif act == 'free_requested':
            rs = live.pop(e['addr'], None)
            s = find(e['addr'])
            if s is not None and rs: seg[s][2] -= rs
        elif act == 'segment_alloc':
            small = e['size'] <= 2*1024*1024 and e['size'] == 2*1024*1024
            st = e.get('stream')
            free = sum(v[0]-v[2] for a,v in seg.items() if v[1]==st and ((v[0]==2097152)==small))
            lfree = max((v[0]-v[2]) for a,v in seg.items()) if seg else 0
            out.append((i, e['size'], free, small))
            seg[e['addr']] = [e['size'], st, 0]; bisect.insort(addrs, e['addr'])
        elif act == 'segment_free':
            seg.pop(e['addr'], None); addrs.remove(e['addr'])
    return out
