from util import *
for stem in ['m01','m02','m03','m04','m05','m06','m07','m08','m09','m10']:
    d = load(stem)
    devs = sorted(set(s['device'] for s in d['segments']))
    for dev in devs:
        segs = [s for s in d['segments'] if s['device']==dev]
        res = sum(s['total_size'] for s in segs)
        freeb = sum(b['size'] for s in segs for b in s['blocks'] if b['state']=='inactive')
        full = [s for s in segs if all(b['state']=='inactive' for b in s['blocks'])]
        part = [s for s in segs if any(b['state']=='inactive' for b in s['blocks']) and s not in full]
        fullb = sum(s['total_size'] for s in full)
        partb = sum(b['size'] for s in part for b in s['blocks'] if b['state']=='inactive')
        live = [b for s in segs for b in s['blocks'] if b['state']=='active_allocated']
        lrs = sum(b.get('requested_size', b['size']) for b in live); ls = sum(b['size'] for b in live)
        nfreeblocks = sum(1 for s in segs for b in s['blocks'] if b['state']=='inactive')
        largest = max([b['size'] for s in segs for b in s['blocks'] if b['state']=='inactive'] or [0])
        print(stem, 'dev', dev, 'nseg', len(segs), 'res', res, g(res), 'free', freeb, g(freeb), '%.1f%%' % (100*freeb/res), 'fullseg', len(full), g(fullb), 'part', len(part), m(partb), 'live', len(live), 'req', g(lrs), m(lrs), 'rounded', g(ls), 'nfree', nfreeblocks, 'largest', m(largest))
        T = d['device_traces'][dev] if dev < len(d['device_traces']) else []
        sa = [i for i,e in enumerate(T) if e['action']=='segment_alloc']
        if sa: print('   last segment_alloc', sa[-1], 'n', len(sa), 'last event', len(T)-1)
