// Allure 3's configuration for this project (`npx allure generate reports/allure-results`, and `hil allure`,
// which also strips the analytics tag Allure writes into every page: harness/report/allure-report.ts).
// One self-contained index.html, so the report opens from disk (file://) with no server; categories that
// keep FAIL (the target broke a documented rule) apart from ERROR (the harness or its host broke), with
// the host too slow for a timing rule (HIL_ERR_HOST_TOO_SLOW, harness/errors.ts) apart from other errors;
// and a history file so that a report carries the earlier runs (hil nightly points it at the nights'
// directory with HIL_ALLURE_HISTORY).
import { defineConfig } from 'allure';

export default defineConfig({
  name: 'Welding cell HIL conformance',
  output: './reports/allure-report',
  historyPath: process.env.HIL_ALLURE_HISTORY || './reports/allure-history.jsonl',
  // The first category whose matcher fits a result takes it.
  categories: [
    {
      id: 'hil-host-too-slow',
      name: 'ERROR: host too slow (the harness could not keep a timing rule; says nothing about the target)',
      matchers: { statuses: ['broken'], message: 'HIL_ERR_HOST_TOO_SLOW' },
    },
    { id: 'hil-fail', name: 'FAIL: the target did not do what the documents say', matchers: { statuses: ['failed'] } },
    { id: 'hil-error', name: 'ERROR: the harness or the environment broke', matchers: { statuses: ['broken'] } },
  ],
  plugins: {
    awesome: {
      options: {
        singleFile: true,
        reportLanguage: 'en',
        reportName: 'Welding cell HIL conformance',
        groupBy: ['parentSuite', 'suite', 'subSuite'],
      },
    },
  },
});
