from util import *
import collections
for stem in ['m01','m02','m03','m04','m05','m06','m07','m08','m09','m10']:
    d = load(stem)
    print('=====', stem, type(d), list(d.keys()) if isinstance(d, dict) else '')
    for dev, T in enumerate(d['device_traces']):
        if not T: continue
        r = Replay(d, dev)
        c = collections.Counter(e['action'] for e in T)
        print(' dev', dev, 'events', len(T), dict(c), 'problems', r.problems[:3])
        print('  peak', r.peak_index, r.peak_allocated, g(r.peak_allocated), 'res@peak', g(r.reserved_at_peak), 'maxres', g(r.max_reserved), 'final alloc', g(r.final_allocated), 'final res', g(r.final_reserved), 'start alloc', g(r.allocated_at_start), r.blocks_at_start)
    segs = d['segments']
    devs = collections.Counter(s['device'] for s in segs)
    print(' segs by dev', dict(devs))
