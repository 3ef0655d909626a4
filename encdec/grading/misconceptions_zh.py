"""The misconceptions of ``misconceptions.MISCONCEPTIONS`` in Chinese: the same keys, one sentence
each, in the words of the lesson cards and the glossary (``book/glossary.yml``).

Plain text only, like the English table; ``language`` picks the table a run speaks.
"""

from __future__ import annotations

MISCONCEPTIONS_ZH = {
    "mask_after_softmax": (
        "在 softmax 之后才加掩码：未来位置的分数已经进入了 softmax 的分母，所以允许位置的权重偏小，"
        "各行之和也不再等于 1。应在 softmax 之前给分数加掩码（把禁止的分数设成一个很大的负数）。"
    ),
    "no_mask": (
        "没有掩码：带掩码的自注意力让答案的位置 i 读到了 i 之后的位置（标签泄漏）。请把因果掩码传给解码器的自注意力。"
    ),
    "mask_inverted": (
        "掩码取反了：True 表示*禁止*，所以上三角（j > i，查询位置 i 的未来）必须是 True；"
        "现在允许的过去被挡住了，未来却露了出来。"
    ),
    "mask_diagonal": (
        "对角线也被遮住了：查询位置 i 可以读它自己的位置 j = i；只有 j > i 才是未来（torch.triu(..., diagonal=1)）。"
    ),
    "mask_not_expanded": ("掩码缺少批次轴：要把 (K, K) 的三角扩展成 (N, K, K)，每个序列一份。"),
    "cross_q_from_encoder": (
        "交叉注意力的 Q 取自编码器（Q/K/V 弄反了）：Q 必须来自解码器的状态（到目前为止的答案，长度 Ka），"
        "K 和 V 来自编码器记忆（长度 Kq）；Q 取自编码器时权重是 (N, Kq, Ka)，变成了题目的每个位置去查询答案。"
    ),
    "cross_kv_from_decoder": (
        "交叉注意力的 K/V 取自解码器：K 和 V 都必须是编码器记忆 enc_inp，即答案的每个位置都要查阅的那本“参考书”。"
    ),
    "cross_reads_dec_inp": (
        "交叉注意力读的是解码器输入，而不是自注意力的输出：它的查询必须是 "
        "out_2 = layer_norm_1(dec_inp + out_1)，即经过带掩码的自注意力之后的答案。"
    ),
    "cross_skipped": ("跳过了交叉注意力：解码器从不读取题目，所以答案无法依赖于题目。"),
    "residual_1_missing": ("带掩码的自注意力外缺少残差连接：layer_norm_1 必须看到 dec_inp + out_1，保留恒等通路。"),
    "residual_2_missing": ("交叉注意力外缺少残差连接：layer_norm_2 必须看到 out_2 + out_3。"),
    "residual_3_missing": ("MLP 外缺少残差连接：layer_norm_3 必须看到 out_4 + out_5。"),
    "prenorm": (
        "在残差之前做了归一化（前归一化）：本课的块是后归一化，x = LayerNorm(x + sublayer(x))；"
        "前归一化（x + sublayer(LayerNorm(x))）是现代的变体，不是本课的块。"
    ),
    "norm_inside_residual": (
        "在残差之前做了归一化：子层的输出先被归一化、再与 x 相加；本课的块先加残差、再归一化："
        "LayerNorm(x + sublayer(x))。"
    ),
    "norms_swapped": (
        "层归一化用错了位置：layer_norm_1 跟在自注意力之后，layer_norm_2 跟在交叉注意力之后，"
        "layer_norm_3 跟在 MLP 之后（每个都有自己的增益和偏置）。"
    ),
    "mlp_skipped": ("跳过了 MLP：交叉注意力之后，每个位置都要经过 feed_forward，并有自己的残差连接和 layer_norm_3。"),
    "no_shift": (
        "没有目标右移：解码器输入必须去掉答案的最后一个词元（ans_b[:, :-1]），标签去掉第一个"
        "（ans_b[:, 1:]），这样位置 t 预测词元 t+1。"
    ),
    "shift_reversed": (
        "右移方向反了：解码器输入是 ans_b[:, :-1]（以 BOS 开头），标签是 ans_b[:, 1:]（以 EOS 结尾），而不是反过来。"
    ),
    "labels_not_sliced": (
        "标签没有切片：标签是 ans_b[:, 1:]，每个解码器位置一个 (N, Ka-1)；答案的第一个词元 BOS 从来不是标签。"
    ),
    "input_not_sliced": ("解码器输入没有切片：答案的最后一个词元没有后继可预测，所以解码器输入是 ans_b[:, :-1]。"),
    "labels_not_shifted": (
        "标签没有右移：损失把位置 t 和它自己的输入词元作比较；位置 t 的标签是答案的词元 t+1（ans_b[:, 1:]）。"
    ),
    "loss_sum": "损失用了求和：应取全部 N*(Ka-1) 个位置的平均交叉熵。",
    "pos_not_sliced": ("位置编码没有切片：解码器输入保留 Ka-1 个词元，所以取前 Ka-1 个位置，ans_pos[:, :-1]。"),
    "pos_shifted": (
        "位置编码从错误的一端切片：词元 t 保持位置 t，所以解码器输入加的是 ans_pos[:, :-1]，而不是 ans_pos[:, 1:]。"
    ),
    "no_question_positions": ("没有加上题目的位置编码：q_emb_inp = emb_layer(ques_b) + ques_pos。"),
    "mask_from_full_answer": (
        "掩码是用未切片的答案构造的：应由解码器输入 ans_b[:, :-1] 构造，使它为 (N, Ka-1, Ka-1)。"
    ),
    "encoder_every_step": (
        "每个解码步都重新运行了编码器：答案变长时，它的记忆 (N, Kq, M) 并不改变。在循环之前运行一次，之后重复使用。"
    ),
    "no_cache": (
        "没有使用 KV 缓存：解码器每一步都重新读入了整个前缀。有了缓存，先把整个前缀送入一次（预填充），"
        "之后每步只送入最新的词元。"
    ),
    "prefix_refed_into_cache": (
        "缓存里已经有整个前缀，却又把它送入了一次：缓存追加了重复的键。预填充之后只送入最新的词元。"
    ),
    "pos_not_advanced": ("新词元的位置编码没有切片：第 t 步的词元需要位置 t（ans_pos[:, t:t+1]），而不是位置 0。"),
    "pos_ahead": (
        "位置编码超前了一位：第 t 步送入的词元位于答案的位置 t（ans_pos[:, t:t+1]）；在第 0 步送入的 BOS 取位置 0。"
    ),
    "ignores_done": (
        "已经生成 EOS 的行还在继续解码：结束的行必须一直输出 EOS。"
        "每个词元都要用给定的 pick_next(logits, done) 选出（它在步与步之间记住哪些行已结束），"
        "而不是直接取 argmax。"
    ),
    "cache_overwrites": (
        "每一步的自注意力只看到了最新的词元：缓存只保留了最新的键和值（update 必须沿时间轴追加，"
        "torch.cat([...], dim=2)，并返回到目前为止缓存的全部内容），或者没有把同一组缓存传给每一步。"
    ),
    "cache_wrong_axis": ("键和值沿错误的轴追加了：(N, H, T, Dh) 沿 T 增长，dim=2。"),
    # 拓展题：一次预填充 P 个词元的解码器前缀
    "prefill_not_one_call": (
        "前缀没有在一次调用中送入：预填充应在一次解码器调用中送入全部 P 个前缀位置（配合 get_subsequent_mask），"
        "之后每步送入一个新词元。"
    ),
    "prefill_no_mask": (
        "预填充没有用因果掩码：P 个前缀位置一次送入，于是每个位置都读到了它后面的前缀词元，"
        "为它缓存的键和值（从第二个解码器层起）带上了未来的信息。预填充时传入 get_subsequent_mask(prefix)；"
        "只送入一个新词元时不需要掩码。"
    ),
    "prefill_last_only": (
        "预填充只缓存了前缀的最后一个位置：缓存必须存放全部 P 个前缀词元的键和值"
        "（把整个前缀在因果掩码下送入一次），否则之后的各步读不到前缀的其余部分。"
    ),
    "prefill_pos_restarted": (
        "预填充之后位置又从 0 开始了：前缀占据位置 0..P-1，所以预填充之后第 t 步送入的词元"
        "（下标 P + t - 1）位于位置 P + t - 1，即 ans_pos[:, P+t-1:P+t]。"
    ),
    # 拓展题第 4 部分：带 KV 缓存的束搜索
    "beam_cache_not_reordered": (
        "缓存没有重排：保留下来的束可能延伸的是别的行上的束，所以每个解码器层的自注意力缓存都要跟着它走"
        "（cache.k.index_select(0, rows)，rows 是每条保留下来的束的父束所在的行）；否则一条束读到的是另一条束的过去。"
    ),
    "beam_no_length_norm": (
        "没有做长度归一化：束的得分是对数概率之和除以 length ** length_penalty（长度算到 EOS 为止，含 EOS）；"
        "只用对数概率之和会偏向短的答案。"
    ),
    "beam_finished_extended": (
        "已结束的束被继续延伸了：生成了 EOS 的束仍是候选，得分和长度不变，后面用 EOS 填充"
        "（它唯一的延续是代价为 0 的 EOS），不再延伸。"
    ),
    "mask_transposed": (
        "掩码转置了：True 必须在对角线以上（j > i，查询位置 i 的未来）；这个掩码禁止的是对角线以下的位置，"
        "也就是过去，却让每个查询位置读到了它之后的内容。"
    ),
    "mask_offset": (
        "掩码的起点太靠右：查询位置 i 必须被禁止读任何 j > i 的位置，但这个掩码仍让它读到自己之后的一个或多个位置。"
        "请检查三角的对角线偏移。"
    ),
    "mask_from_values": (
        "批次中不同序列的掩码不一样：它是用词元的值构造的，但查询位置能读到哪些位置只取决于位置本身（i 和 j）"
        "，与位置上的内容无关。"
    ),
    "mask_not_bool": (
        "模式是对的，但掩码不是布尔类型：masked_fill 和注意力把 True 当作禁止，所以请返回 bool 张量（用比较运算，"
        "或调用 .bool()）。"
    ),
    "softmax_fill_finite": (
        "在 softmax 之前，被遮住的分数填成了一个有限值，所以禁止的位置仍然得到了一些权重：禁止的分数必须变成 -inf（或一个非常大的负数）"
        "，这样它的权重才恰好为 0。"
    ),
    "softmax_wrong_axis": ("softmax 作用在了错误的轴上：每个查询的权重（一行，即最后一个轴，对各个键）之和必须为 1。"),
    "softmax_not_normalised": (
        "每一行权重的比例是对的，但和不等于 1：指数除以了错误的和（或者没有除）。softmax 要在每一行的键上归一化。"
    ),
    "softmax_scaled": ("masked_softmax 内部又缩放了分数：它应当原样使用传入的分数（注意力已经除过一次 sqrt(Dh)）。"),
    "shift_wraps": (
        "移位绕回来了（torch.roll）：一端的词元又出现在另一端。移位是用切片在两端各去掉一个词元，没有任何东西绕回。"
    ),
    "shift_wrong_axis": ("移位沿着批次轴进行了：ans_b 是 (N, Ka)，每行一个答案，移位应当沿着答案的位置（dim 1）。"),
    "shift_off_by_one": (
        "切片差了一位：解码器输入保留从 BOS 开始的 Ka-1 个词元，标签是 BOS 之后的 Ka-1 个词元，"
        "这样每个位置恰好预测下一个词元。"
    ),
    "loss_reduction": (
        "损失的归约方式不对：课程的损失是对全部 N*(Ka-1) 个答案位置取一次平均，而不是求和，也不是各序列之和的平均。"
    ),
    "loss_on_probabilities": (
        "把 softmax 的输出送进了 cross_entropy：它自己会做 log_softmax，所以应当输入原始 logits（概率会被再压缩一次）。"
    ),
    "nll_on_logits": (
        "把 nll_loss 用在了原始 logits 上：nll_loss 需要对数概率，所以先做 log_softmax（或者直接用 cross_entropy，"
        "它两步都做）。"
    ),
    "nll_on_probabilities": (
        "把 nll_loss 用在了概率上：它需要对数概率（缺了取对数这一步），所以应当用 log_softmax 而不是 softmax。"
    ),
    "loss_class_axis": (
        "类别轴是用 reshape 或 view 移动的：cross_entropy 要求类别在 dim 1，"
        "而把 (N, Ka-1, V) reshape 成 (N, V, Ka-1) 会把位置和类别搅乱。"
        "请移动轴（transpose），或者把两者分别展平成 (N*(Ka-1), V) 和 (N*(Ka-1),)。"
    ),
    "loss_label_smoothing": (
        "损失用了标签平滑：本练习的损失是下一个词元的普通交叉熵（平滑是训练时的选择，不属于下一个词元损失本身）。"
    ),
    "loss_ignores_eos": (
        "有些答案位置没有计入损失（设了 ignore_index，或按某个词元过滤了）：每个位置都预测它的下一个词元，"
        "包括 EOS，全部都要计入。"
    ),
    "cache_prepends": ("新的键和值放在了旧的前面：缓存按位置的顺序保存它们，最早的在前，新的接在时间轴的末尾。"),
    "cache_kv_swapped": ("键和值弄反了：update 返回 (keys, values)，各自由自己的 k_new 或 v_new 增长而来。"),
    "cache_returns_new": (
        "update 保存了全部内容，却只返回了新的键和值：这一步的注意力必须看到到目前为止的每个位置，所以要返回整个缓存。"
    ),
    "layers_not_chained": (
        "每个解码器层都送入了这一步的嵌入：各层是一个栈，每一层读取前一层的输出（h = layer(h, ...)）"
        "，只有第一层读取嵌入。"
    ),
    "memory_without_positions": (
        "编码器记忆在计算时没有加上题目的位置编码：编码器读取的是 emb_layer(ques_b) + ques_pos，"
        "和训练时一样（model.encode 会加上它们）。"
    ),
    "one_cache_for_all_layers": (
        "所有解码器层共用了一个缓存：每一层投影出自己的键和值，所以每层都需要自己的一对缓存（用 * 构造的列表会重复同一批对象）"
        "。"
    ),
    "observed_not_causal": (
        "未来泄漏到了过去，但输出与任何已知错误都不吻合：检查带掩码的自注意力读的是什么"
        "（查询、键和值都是 dec_inp，并带因果掩码），以及注意力之外有没有混合答案各位置的操作。"
    ),
    "observed_random": (
        "各模块处于 eval 模式，输出必须是确定的：却有随机的操作在运行"
        "（例如 F.dropout(x, p) 没有传 training=self.training；self.dropout 会跟随模块的模式）。"
    ),
    "observed_lengths_differ": (
        "答案的嵌入和位置编码以不同的长度相加（Ka 和 Ka-1）：解码器输入保留 Ka-1 个位置，所以两者都要切片，"
        "emb_layer(ans_b)[:, :-1] 和 ans_pos[:, :-1]。"
    ),
    "ignores_question": ("题目改变时输出没有变化：解码器没有通过交叉注意力读取编码器记忆。"),
    # --- 热身练习（warmup）：形状、手写掩码、填充、采样 ---------------------------------------
    "scores_transposed": (
        "分数转置了：Q K^T 每个查询一行、每个键一列，形状是 (N, H, Lq, Lk)；(N, H, Lk, Lq) 是 K Q^T。"
    ),
    "heads_not_split": (
        "没有把头分开：H 个头各自处理宽度 Dh = M // H 的一段，所以 Q、K、V 是 (N, H, L, M // H)，而不是 (N, H, L, M)。"
    ),
    "kv_length_from_queries": (
        "K 和 V 用了查询的长度：键和值来自被读取的序列（长度 Lk，在交叉注意力中就是编码器记忆），"
        "查询来自读取它们的序列（长度 Lq）。"
    ),
    "heads_not_merged": (
        "没有把头合并：注意力的输出要把 H 个头拼回宽度 M 并投影，(N, H, Lq, Dh) -> (N, Lq, M)，每个查询位置一个向量。"
    ),
    "heads_after_length": (
        "分头后的形状写成了 (N, L, H, Dh)，也就是转置之前的 view：本课程的注意力（以及 torch 的 "
        "scaled_dot_product_attention）要求头在长度之前，(N, H, L, Dh)，这样每个头用一块 (L, Dh) 的查询去乘它的键；"
        "view(N, L, H, Dh).transpose(1, 2)。"
    ),
    "padding_on_queries": (
        "填充掩码遮住的是查询的行，而不是键的列：填充位置不能被*读取*，所以要在键轴（最后一个轴，"
        "j >= 长度）上对每个查询都禁止它。"
    ),
    "padding_off_by_one": (
        "填充掩码差了一位：长度为 L 的序列在位置 0..L-1 上是真实词元，所以恰好是 j >= L 的键位置是填充。"
    ),
    "padding_inverted": (
        "填充掩码取反了：True 表示*禁止*，所以它必须在填充位置（j >= 长度）上为 True，在真实词元上为 False。"
    ),
    "padding_no_head_axis": (
        "填充掩码缺少头的轴：要做成 (B, 1, Tq, Tk)，这样它才能在分数 (B, H, Tq, Tk) 的 H 个头上广播。"
    ),
    "sdpa_mask_not_inverted": (
        "掩码沿用了本课程的约定：F.scaled_dot_product_attention 的布尔 attn_mask 在查询*可以*关注的地方为 True，"
        "与我们的约定（True 表示禁止）相反，所以要取反（~mask）；原样传入，每个查询就只读填充和它的未来。"
    ),
    "masks_combined_with_and": (
        "两个掩码用“与”合并了：一个位置只要在未来，或者是填充，就被禁止（causal | padding），而不是两者同时成立才禁止。"
    ),
    "temperature_after_softmax": (
        "温度用在了 softmax 之后：应先把 logits 除以温度 T，再取 softmax（softmax(logits / T)）；"
        "把概率除以 T，重新归一化后什么也没改变，不归一化则各行之和不等于 1。"
    ),
    "top_k_off_by_one": (
        "top-k 保留的词元个数不对：恰好保留概率最大的 k 个词元（不计并列），与第 k 大的概率比较时用 >=。"
    ),
    "top_p_crossing_token": (
        "top-p 在边界上保留错了词元：保留概率之和达到 p 的最小的一组最可能的词元，所以让概率之和越过 p 的"
        "那个词元要保留，它之后的都不保留（一个词元在它前面的概率之和小于 p 时保留）。"
    ),
    "sampling_not_renormalised": (
        "保留下来的概率没有重新归一化：top-k 或 top-p 去掉一些词元之后，要把它们除以剩下概率之和，"
        "让每一行之和重新等于 1。"
    ),
    "top_k_not_renormalised": (
        "top-k 保留下来的概率没有重新归一化（top-p 保留的归一化了）：也要把它们除以 top-k 保留的概率之和，"
        "让这一行之和等于 1，top-p 读到的才是一个分布的累计概率；只在最后归一化，每个词元前面的概率之和偏小，"
        "top-p 会保留太多词元。"
    ),
}
