import rp, sys
def idle(stem, dev):
    d = rp.load(stem)
    segs = [s for s in d['segments'] if s['device']==dev]
    res = sum(s['total_size'] for s in segs)
    freeb = sum(b['size'] for s in segs for b in s['blocks'] if b['state']!='active_allocated')
    alloc_req = sum(b['requested_size'] for s in segs for b in s['blocks'] if b['state']=='active_allocated')
    nblk = sum(1 for s in segs for b in s['blocks'] if b['state']=='active_allocated')
    empty = [s for s in segs if all(b['state']!='active_allocated' for b in s['blocks'])]
    part = [s for s in segs if s not in empty]
    gaps = sum(b['size'] for s in part for b in s['blocks'] if b['state']!='active_allocated')
    partg = sum(1 for s in part if any(b['state']!='active_allocated' for b in s['blocks']))
    print(stem, 'segs', len(segs), 'reserved', res, rp.g(res), 'free', freeb, rp.g(freeb), '%.1f%%'%(100*freeb/res),
          'allocated req', rp.g(alloc_req), 'blocks', nblk, '| empty segs', len(empty), rp.g(sum(s['total_size'] for s in empty)),
          '| gaps', rp.m(gaps), 'in', partg, 'segs of', len(part), '| largest empty', rp.m(max([s['total_size'] for s in empty] or [0])),
          '>100MiB', sum(1 for s in empty if s['total_size']>100*2**20))
if __name__ == '__main__':
    idle(sys.argv[1], int(sys.argv[2]))
