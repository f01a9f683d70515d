// Telemetry records cross-checked with Status and Describe (document 1 part 2 "Telemetry binary
// records": positions and targets are drive counts, check pdo_fresh and each validity flag before using
// a value). Enabling drives needs a target where motion is allowed.

import { latestSequence, readBatch } from '../../harness/clients/telemetry.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, needsMotion, test } from '../../harness/fixture.ts';
import { problems } from '../../harness/problems.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** CiA 402 "operation enabled": statusword bits 0x6F equal 0x27. */
const OPERATION_ENABLED = (sw: number) => (sw & 0x6f) === 0x27;

describe('records and status', () => {
  test(
    'with all axes enabled and armed under a grant, records match Status: enable mask, armed, grant, masks, statuswords in operation enabled, positions in drive counts',
    covers(
      'rule:telemetry.drive_counts', 'rule:telemetry.check_validity_flags',
      ...['armed', 'axis_enable_mask', 'app_grant_generation', 'control_generation', 'home_epoch', 'grant_deadline_host_ns', 'grant_active', 'grant_axis_mask',
        'safety_fault_mask', 'execution_fault_reasons', 'pdo_fresh_axis_mask', 'home_valid_mask', 'wkc_actual', 'wkc_expected', 'io_armed', 'io_output_word',
        'bus_submission_return_code'].map((f) => `layout:capture_record:${f}`),
      ...['position', 'target', 'statusword', 'error_code', 'velocity_actual_counts_per_s', 'velocity_actual_valid', 'following_error_counts', 'following_error_valid',
        'torque_raw', 'torque_valid', 'mode_display', 'slave_online', 'slave_operational', 'slave_al_state', 'pdo_fresh', 'pdo_observed_time_ns'].map((f) => `layout:capture_axis:${f}`),
    ),
    async ({ cell, client, target, description, skip }) => {
      needsMotion({ skip }, target);
      const n = description.axes.length;
      const all = (1 << n) - 1;
      const s = await cell.hold();
      const en = await cell.fenced('enable', s, { axis_mask: all });
      expect(en.status, en.reply.error).toBe(200);
      await waitStatus(client, (x) => Number(x.core?.axis_enable_mask ?? 0) === all);
      const arm = await cell.fenced('arm', s);
      expect(arm.status, arm.reply.error).toBe(200);
      const st = await waitStatus(client, (x) => x.core?.armed === 1n);
      const from = await latestSequence(client);
      // About 60 cycles normally; on a loaded machine the core may run fewer in 60 ms, so read again until more
      // than ten records follow the cursor (a safety bound, no timing asserted).
      await sleep(60);
      let b = await readBatch(client, from);
      for (const stop = Date.now() + 10_000; b.records.length <= 10 && Date.now() < stop; b = await readBatch(client, from)) await sleep(20);
      const st2 = await readStatus(client);
      expect(b.records.length).toBeGreaterThan(10);
      const core = st2.core!;
      const grant = (st2 as unknown as { grant: { generation: bigint } }).grant;
      const { list: bad, add: want } = problems();
      for (const r of b.records) {
        const at = `seq ${r.seq}`;
        want(r.axis_enable_mask === Number(core.axis_enable_mask), `${at}: axis_enable_mask ${r.axis_enable_mask}`);
        want(r.armed === 1, `${at}: armed ${r.armed}`);
        want(r.grant_active === 1, `${at}: grant_active ${r.grant_active}`);
        want((r.grant_axis_mask & all) !== 0, `${at}: grant_axis_mask ${r.grant_axis_mask}`);
        want(r.app_grant_generation === s.generation && grant.generation === s.generation, `${at}: app_grant_generation ${r.app_grant_generation}`);
        want(r.control_generation === s.generation, `${at}: control_generation ${r.control_generation}`);
        want(r.grant_deadline_host_ns > 0n, `${at}: grant_deadline_host_ns 0 under a grant`);
        want(r.home_epoch === core.home_epoch, `${at}: home_epoch ${r.home_epoch}`);
        want(r.home_valid_mask === Number(core.home_valid_mask), `${at}: home_valid_mask ${r.home_valid_mask}`);
        want(r.safety_fault_mask === Number(core.safety_fault_mask), `${at}: safety_fault_mask ${r.safety_fault_mask}`);
        want(r.execution_fault_reasons === Number(core.execution_fault_reasons), `${at}: execution_fault_reasons ${r.execution_fault_reasons}`);
        want(r.io_armed === Number(core.io_armed), `${at}: io_armed ${r.io_armed}`);
        want(r.io_output_word === Number(core.io_output_word), `${at}: io_output_word ${r.io_output_word}`);
        want(r.pdo_fresh_axis_mask === all, `${at}: pdo_fresh_axis_mask ${r.pdo_fresh_axis_mask}`);
        want(r.wkc_expected > 0 && r.wkc_actual === r.wkc_expected, `${at}: wkc ${r.wkc_actual}/${r.wkc_expected}`);
        want(r.bus_submission_return_code >= 0n, `${at}: bus_submission_return_code ${r.bus_submission_return_code}`);
        for (let i = 0; i < n; i++) {
          const a = r.ax[i]!;
          // Validity first: the drive must be online, operational and fresh before its values are used.
          want(a.pdo_fresh === 1 && a.slave_online === 1 && a.slave_operational === 1 && a.slave_al_state === 8, `${at} ax[${i}]: not fresh/online/op`);
          want(a.pdo_observed_time_ns > 0n && a.pdo_observed_time_ns <= r.t_ns, `${at} ax[${i}]: pdo_observed_time_ns ${a.pdo_observed_time_ns}`);
          if (a.pdo_fresh !== 1) continue;
          want(OPERATION_ENABLED(a.statusword), `${at} ax[${i}]: statusword 0x${a.statusword.toString(16)} not operation enabled`);
          want(a.error_code === 0, `${at} ax[${i}]: error_code ${a.error_code}`);
          want(a.mode_display === 8, `${at} ax[${i}]: mode_display ${a.mode_display}`);
          // A still, enabled drive holds its target.
          want(Math.abs(a.target - a.position) <= 10, `${at} ax[${i}]: target ${a.target} far from position ${a.position}`);
          if (a.velocity_actual_valid) want(Math.abs(a.velocity_actual_counts_per_s) < 1_000_000, `${at} ax[${i}]: velocity ${a.velocity_actual_counts_per_s}`);
          if (a.following_error_valid) want(Math.abs(a.following_error_counts) <= 10, `${at} ax[${i}]: following error ${a.following_error_counts}`);
          if (a.torque_valid) want(Math.abs(a.torque_raw) <= 3000, `${at} ax[${i}]: torque ${a.torque_raw}`);
        }
      }
      expect(bad, bad.slice(0, 5).join("; ")).toEqual([]);
      // Positions are drive counts: status position (logical units) x counts_per_unit x sign.
      const last = b.records.at(-1)!;
      for (let i = 0; i < n; i++) {
        const d = description.axes[i]!;
        const counts = Number(st2.axes[i]!.position) * Number(d.counts_per_unit) * Number(d.sign);
        expect(Math.abs(last.ax[i]!.position - counts), `axis ${d.id}: ${last.ax[i]!.position} counts vs status ${st2.axes[i]!.position}`).toBeLessThanOrEqual(3);
      }
      expect(st.core!.armed).toBe(1n);
    },
  );
});
