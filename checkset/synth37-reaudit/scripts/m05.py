import rp, collections
d = rp.load('m05'); r = rp.R(d, 0); T = r.T
print(len(T), collections.Counter(e['action'] for e in T), 'settings', d.get('allocator_settings',{}).get('expandable_segments'))
print('start alloc', rp.g(r.alloc0), r.nblocks0, 'res', rp.g(r.res0))
print('peak', r.pk, rp.g(r.A[r.pk]), 'max res', rp.g(max(r.Rv)))
sf = [i for i,e in enumerate(T) if e['action']=='segment_free']
bursts=[]; 
for i in sf:
    if bursts and i <= bursts[-1][-1] + 2: bursts[-1].append(i)
    else: bursts.append([i])
segstream = {}
for s in r.segs: segstream[s['address']] = s['stream']
for b in bursts:
    a, z = b[0], b[-1]
    # next segment_alloc after burst and its request
    j = z+1
    while T[j]['action'] not in ('segment_alloc','alloc','oom'): j+=1
    k = j
    while T[k]['action'] != 'alloc': k+=1
    reqst = T[k]['stream']
    other = sum(1 for i in b if T[i]['stream'] != reqst)
    dt = (T[j]['time_us'] - T[a]['time_us'])/1e6
    print('burst', a, z, len(b), rp.g(sum(T[i]['size'] for i in b)), 'res', rp.g(r.Rv[a-1]), '->', rp.g(r.Rv[z]), 'alloc', rp.g(r.A[a-1]), rp.g(r.A[z]),
          'next', j, T[j]['action'], rp.m(T[j].get('size',0)), 'req', rp.m(T[k]['size']), rp.site(T[k]['frames']), 'other streams', other, 'dt %.4f s'%dt,
          'prev ev', T[a-1]['action'], 'time from prev alloc?')
    # frames of the request
    print('   req frames', [(f['filename'].split('/')[-1], f['line'], f['name']) for f in T[k]['frames']][:6])
print('last segalloc', max(i for i,e in enumerate(T) if e['action']=='segment_alloc'))
# per-stream at end
pst = collections.defaultdict(lambda:[0,0])
for s in r.segs:
    pst[s['stream']][0]+=s['total_size']; pst[s['stream']][1]+=sum(b['size'] for b in s['blocks'] if b['state']!='active_allocated')
for k,v in pst.items(): print('stream', k, rp.g(v[0]), 'free', rp.g(v[1]))
